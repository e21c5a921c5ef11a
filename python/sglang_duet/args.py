"""DuetArgs: the duet flags, one frozen dataclass whose fields generate the `--duet-*` CLI."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sglang_duet.router import ROUTERS

MODES = ("adaptive", "aggregated", "spatial")
PARTITION_BACKENDS = ("auto", "green-ctx", "libsmctrl", "none")
# Hardware profiles of sglang_duet.latency; "auto" reads the device name at start-up.
HARDWARE_CHOICES = ("auto", "h100-sxm", "h200", "a100-80g", "cpu")
# sglang_duet.router's registry, plus SGLang's own data-parallel controller
ROUTER_CHOICES = (*ROUTERS, "sglang")


class DuetArgError(ValueError):
    """A duet flag got a value it does not accept; the message names the flag."""


def _choice(*choices: str) -> dict[str, Any]:
    return {"choices": choices}


@dataclass(frozen=True)
class DuetArgs:
    mode: str = field(
        default="adaptive",
        metadata={
            "help": "adaptive: aggregated mixed batches unless the predicted TBT breaks the SLO, "
            "then spatial; aggregated: never split; spatial: split whenever both phases "
            "have work.",
            **_choice(*MODES),
        },
    )
    tbt_slo_ms: float = field(
        default=100.0,
        metadata={"help": "Time-between-tokens SLO in milliseconds (> 0).", "min": 0.0},
    )
    partition_backend: str = field(
        default="auto",
        metadata={
            "help": "SM partition backend: auto tries green-ctx, then libsmctrl, then none.",
            **_choice(*PARTITION_BACKENDS),
        },
    )
    max_lookahead: int = field(
        default=4,
        metadata={"help": "Most decode steps run back to back per spatial iteration (>= 1).",
                  "min": 1},
    )
    decode_graph_sizes: int = field(
        default=6,
        metadata={
            "help": "Capture SGLang's decode CUDA graphs on this many partition sizes (spread "
            "over the menu; the policy then chooses among them); each adds one decode capture "
            "to start-up. 0: spatial decode runs eagerly on the whole menu. GPU with "
            "green-ctx only.",
            "min": 0,
        },
    )
    hardware: str = field(
        default="auto",
        metadata={
            "help": "Hardware profile of the latency model; auto detects the GPU "
            "(cpu when there is none).",
            **_choice(*HARDWARE_CHOICES),
        },
    )
    calibration: str | None = field(
        default=None,
        metadata={"help": "Latency-model calibration: a name or a JSON path."},
    )
    plan_log: str | None = field(
        default=None,
        metadata={"help": "Write every BatchPlan plus its measured_s as one JSON line to "
                         "PATH.tp<rank>.dp<rank>."},
    )
    router: str = field(
        default="duet",
        metadata={
            "help": "--dp-size dispatch: duet (latency-model router), round-robin, "
            "least-tokens, total-requests, total-tokens (sglang_duet.router), or sglang "
            "(SGLang's own controller and --load-balance-method).",
            **_choice(*ROUTER_CHOICES),
        },
    )
    online_correction: bool = field(
        default=True,
        metadata={"help": "Correct predictions with measured iteration times."},
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            flag = self.flag(f.name)
            choices = f.metadata.get("choices")
            if choices is not None and value not in choices:
                raise DuetArgError(
                    f"{flag}: invalid value {value!r}; accepted values: {', '.join(choices)}"
                )
            if "min" in f.metadata:
                lo = f.metadata["min"]
                bad = value <= lo if isinstance(value, float) else value < lo
                if bad:
                    rel = ">" if isinstance(value, float) else ">="
                    raise DuetArgError(f"{flag}: invalid value {value!r}; must be {rel} {lo}")

    @staticmethod
    def flag(name: str) -> str:
        return "--duet-" + name.replace("_", "-")

    @property
    def tbt_slo_s(self) -> float:
        return self.tbt_slo_ms / 1000.0

    @classmethod
    def add_cli_args(cls, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("sglang-duet")
        for f in dataclasses.fields(cls):
            kwargs: dict[str, Any] = {"dest": "duet_" + f.name, "help": f.metadata["help"]}
            if f.type in (bool, "bool"):
                kwargs["action"] = argparse.BooleanOptionalAction
                kwargs["default"] = f.default
            else:
                # Parse as str so that a bad value reaches __post_init__'s message (which lists
                # the accepted values) instead of argparse's generic one.
                kwargs["default"] = f.default
                kwargs["type"] = str
                kwargs["metavar"] = "{" + ",".join(f.metadata["choices"]) + "}" if (
                    "choices" in f.metadata) else f.name.upper()
            group.add_argument(cls.flag(f.name), **kwargs)

    @classmethod
    def from_cli_args(cls, ns: argparse.Namespace) -> DuetArgs:
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = getattr(ns, "duet_" + f.name)
            values[f.name] = _convert(f, raw)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _convert(f: dataclasses.Field, raw: Any) -> Any:
    if raw is None or not isinstance(raw, str):
        return raw
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    try:
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
    except ValueError:
        raise DuetArgError(
            f"{DuetArgs.flag(f.name)}: invalid value {raw!r}; expected {kind.split()[0]}"
        ) from None
    return raw
