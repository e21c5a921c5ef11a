"""DuetArgs: the duet flags, one frozen dataclass whose fields generate the `--duet-*` CLI.

The accepted names come from the registries they select from (policy modes, partition backends,
latency hardware profiles), so a new registry entry is a new CLI choice with no edit here.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from sglang_duet.cli_args import ArgError, add_dataclass_args, check_fields, from_namespace
from sglang_duet.latency.hardware import HARDWARE, HARDWARE_ALIASES
from sglang_duet.partition.registry import BACKEND_NAMES
from sglang_duet.policy import POLICY_MODES
from sglang_duet.policy.admission import ADMISSION_ORDERS, AdmissionConfig
from sglang_duet.policy.backlog import BACKLOG_AUTO, BACKLOG_DECODE_SHARE
from sglang_duet.router import ROUTERS

MODES: tuple[str, ...] = tuple(POLICY_MODES)
PARTITION_BACKENDS: tuple[str, ...] = tuple(BACKEND_NAMES)
# "auto" reads the device name at start-up; "cpu" is the CPU serving profile (runtime/components).
HARDWARE_CHOICES: tuple[str, ...] = ("auto", *HARDWARE, *HARDWARE_ALIASES, "cpu")
# sglang_duet.router's registry, plus SGLang's own data-parallel controller
ROUTER_CHOICES: tuple[str, ...] = (*ROUTERS, "sglang")
PREFIX = "--duet-"


class DuetArgError(ArgError):
    """A duet flag got a value it does not accept; the message names the flag."""


class DuetFlags:
    """What every `--duet-*` flag dataclass shares (DuetArgs, server.config.ServeArgs): checked
    on construction, added to a parser under `GROUP`, read back from its namespace."""

    GROUP: ClassVar[str] = "sglang-duet"

    def __post_init__(self) -> None:
        try:
            check_fields(self, PREFIX)
        except ArgError as e:
            raise DuetArgError(str(e)) from None

    @classmethod
    def add_cli_args(cls, parser: argparse.ArgumentParser) -> None:
        add_dataclass_args(parser.add_argument_group(cls.GROUP), cls, prefix=PREFIX,
                           dest_prefix="duet_")

    @classmethod
    def from_cli_args(cls, ns: argparse.Namespace) -> Any:
        try:
            return from_namespace(cls, ns, prefix=PREFIX, dest_prefix="duet_")
        except ArgError as e:
            raise DuetArgError(str(e)) from None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


HEADROOM_SHARE = 0.1  # of the TBT SLO: the --duet-tbt-headroom-ms default


@dataclass(frozen=True)
class DuetArgs(DuetFlags):
    mode: str = field(
        default="adaptive",
        metadata={
            "help": "adaptive: aggregated mixed batches unless the predicted TBT breaks the SLO, "
            "then spatial; aggregated: never split; spatial: split whenever both phases "
            "have work.",
            "choices": MODES,
        },
    )
    tbt_slo_ms: float = field(
        default=100.0,
        metadata={"help": "Time-between-tokens SLO in milliseconds (> 0, finite).", "min": 0.0},
    )
    tbt_headroom_ms: float | None = field(
        default=None,
        metadata={"help": "Milliseconds of the TBT SLO the planner keeps for what the scheduler "
                  "does not see (token delivery through the HTTP front end, detokenization); "
                  "it plans gaps of at most the SLO minus this (>= 0, below the SLO; default "
                  "a tenth of the SLO).", "min": 0.0},
    )
    partition_backend: str = field(
        default="auto",
        metadata={
            "help": "SM partition backend: auto tries green-ctx, then libsmctrl, then none; a "
            "named GPU backend that is not usable here fails start-up.",
            "choices": PARTITION_BACKENDS,
        },
    )
    max_lookahead: int = field(
        # enough steps to cover a spatial prefill with a small decode batch (t_d ~ 10 ms against
        # a 150 ms prefill): with 8 the uncovered tail carried into the next iteration forced a
        # chain of shrunk spatial plans (issue #23; azure-code at QPS 36 kept up only with 16)
        default=16,
        metadata={"help": "Most decode steps run back to back per spatial iteration (>= 1).",
                  "min": 1},
    )
    backlog_share: float = field(
        default=BACKLOG_DECODE_SHARE,
        metadata={"help": "While prompts queue beyond one iteration, the decode step every "
                  "plan aims at, as a share of the TBT target (0 < share <= 1; 1: the target "
                  "itself), or 0: a share that follows the KV pool's occupancy (1 up to 0.4 of it "
                  "held, 0.3 from 0.7), with no mixed prefill+decode batch from 0.5 held. Lower "
                  "runs decode faster so requests free their KV sooner (pays when the KV pool, "
                  "not prefill, limits load)."},
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
    partition_min_sms: int = field(
        default=16,
        metadata={
            "help": "Fewest SMs either side of a split may have (the backend's own minimum "
            "rounds it up: 8 for Hopper green contexts, one TPC for libsmctrl).",
            "min": 1,
        },
    )
    hardware: str = field(
        default="auto",
        metadata={
            "help": "Hardware profile of the latency model; auto detects the GPU "
            "(cpu when there is none).",
            "choices": HARDWARE_CHOICES,
        },
    )
    calibration: str | None = field(
        default=None,
        metadata={"help": "Latency-model calibration: a name or a JSON path (checked at start)."},
    )
    plan_log: str | None = field(
        default=None,
        metadata={"help": "Write every BatchPlan plus its measured_s as one JSON line to "
                          "PATH.tp<rank>.dp<rank> (the directory must exist and be writable)."},
    )
    router: str = field(
        default="duet",
        metadata={
            "help": "--dp-size dispatch: duet (latency-model router), round-robin, "
            "least-tokens, total-requests, total-tokens, vllm-dp (vLLM's DP balancer rule; "
            "sglang_duet.router), or sglang "
            "(SGLang's own controller and --load-balance-method).",
            "choices": ROUTER_CHOICES,
        },
    )
    online_correction: bool = field(
        default=True,
        metadata={"help": "Correct predictions with measured iteration times."},
    )
    admission: str = field(
        default="deadline",
        metadata={"help": "Order the waiting prompts are admitted in (policy/admission.py): "
                  "fcfs: arrival order (SGLang's); deadline: those that can still meet their "
                  "TTFT deadline first, the most of them (Moore-Hodgson over the latency model's "
                  "prefill predictions); sjf: shortest predicted prefill first. Every order "
                  "puts requests past the aging bound first.",
                  "choices": ADMISSION_ORDERS},
    )
    ttft_slo_ms: float = field(
        default=10000.0,
        metadata={"help": "TTFT SLO in milliseconds: a request's deadline is its arrival plus "
                  "this (> 0, finite).", "min": 0.0},
    )
    ttft_per_token_ms: float = field(
        default=0.0,
        metadata={"help": "Milliseconds of TTFT deadline added per prompt token (>= 0; "
                  "0: one deadline for every prompt)."},
    )
    aging: float = field(
        default=3.0,
        metadata={"help": "A request waiting longer than this many TTFT SLOs is admitted "
                  "first, in arrival order, whatever --duet-admission says (> 0): no prompt "
                  "is starved.", "min": 0.0},
    )

    @staticmethod
    def flag(name: str) -> str:
        return PREFIX + name.replace("_", "-")

    @property
    def tbt_slo_s(self) -> float:
        return self.tbt_slo_ms / 1000.0

    @property
    def admission_config(self) -> AdmissionConfig:
        """The admission order's settings, in seconds (policy/admission.py)."""
        return AdmissionConfig(self.admission, self.ttft_slo_ms / 1000.0,
                               self.ttft_per_token_ms / 1000.0, self.aging)

    @property
    def tbt_target_s(self) -> float:
        """The gap the planner aims at: the SLO less the headroom (seconds)."""
        return target_tbt_s(self.tbt_slo_ms, self.tbt_headroom_ms)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.backlog_share != BACKLOG_AUTO and not 0.0 < self.backlog_share <= 1.0:
            raise DuetArgError(f"{self.flag('backlog_share')} {self.backlog_share:g} must be in "
                               f"(0, 1], or {BACKLOG_AUTO:g} (automatic)")
        if self.ttft_per_token_ms < 0:
            raise DuetArgError(f"{self.flag('ttft_per_token_ms')}: invalid value "
                               f"{self.ttft_per_token_ms!r}; must be >= 0")
        if self.tbt_headroom_ms is not None and self.tbt_headroom_ms >= self.tbt_slo_ms:
            raise DuetArgError(f"{self.flag('tbt_headroom_ms')} {self.tbt_headroom_ms:g} must be "
                               f"below {self.flag('tbt_slo_ms')} {self.tbt_slo_ms:g}")


def target_tbt_s(slo_ms: float, headroom_ms: float | None) -> float:
    """The planner's gap target (s): the TBT SLO less the headroom for the front end's
    delivery, ``HEADROOM_SHARE`` of the SLO unless given (the simulator's duet uses it too).
    Measured in the simulator with its front end (Azure-Code, QPS 30): planned gaps at the SLO
    itself reached the client up to 14 ms late, and 37% of requests missed the SLO."""
    headroom = slo_ms * HEADROOM_SHARE if headroom_ms is None else headroom_ms
    return (slo_ms - headroom) / 1000.0

