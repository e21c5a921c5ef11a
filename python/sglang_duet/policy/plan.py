"""BatchPlan: what runs this iteration -- the language between policy, scheduler, simulator, logs.

Modes:

* ``aggregated``: one mixed chunked-prefill batch (decodes + prefill chunks) on the whole GPU;
  ``sms_decode == sms_prefill == total``, ``lookahead == 1``, ``predicted_total_s`` is the mixed
  batch's latency (``predicted_decode_s``/``predicted_prefill_s`` repeat it).
* ``spatial``: a decode-only batch on ``sms_decode`` SMs runs ``lookahead`` (k) steps while one
  prefill-only batch runs on the disjoint ``sms_prefill`` SMs. ``predicted_decode_s`` is one
  decode step t_d, ``predicted_prefill_s`` the prefill batch t_p, both under contention, and
  ``predicted_total_s = max(k * t_d, t_p)``.
* ``decode_only``: decodes alone on the whole GPU (``sms_decode == total``, ``sms_prefill == 0``),
  one step; prefill waits.
* ``idle``: nothing to run.

All times are seconds; all predictions already include the policy's correction factors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .state import PrefillChunk

Mode = Literal["aggregated", "spatial", "decode_only", "idle"]
MODES: tuple[str, ...] = ("aggregated", "spatial", "decode_only", "idle")


@dataclass(frozen=True, slots=True)
class BatchPlan:
    mode: Mode
    decode_rids: tuple[str, ...]
    prefill: tuple[PrefillChunk, ...]
    sms_decode: int
    sms_prefill: int
    lookahead: int
    predicted_total_s: float
    predicted_decode_s: float
    predicted_prefill_s: float
    reason: str

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown plan mode {self.mode!r}")
        if self.lookahead < 1:
            raise ValueError(f"lookahead must be >= 1, got {self.lookahead}")

    @property
    def num_decode_tokens(self) -> int:
        """Decode tokens this plan produces (k per decode)."""
        return len(self.decode_rids) * self.lookahead

    @property
    def num_prefill_tokens(self) -> int:
        return sum(c.length for c in self.prefill)

    @property
    def predicted_tbt_s(self) -> float:
        """Predicted time between tokens of the running decodes under this plan."""
        if self.mode == "aggregated":
            return self.predicted_total_s
        return self.predicted_decode_s

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict (chunks as dicts; times in seconds)."""
        return {
            "mode": self.mode,
            "decode_rids": list(self.decode_rids),
            "prefill": [c.to_dict() for c in self.prefill],
            "sms_decode": self.sms_decode,
            "sms_prefill": self.sms_prefill,
            "lookahead": self.lookahead,
            "predicted_total_s": self.predicted_total_s,
            "predicted_decode_s": self.predicted_decode_s,
            "predicted_prefill_s": self.predicted_prefill_s,
            "reason": self.reason,
        }

    # ---- named constructors: one per mode, so no call site passes ten positional values ----

    @classmethod
    def aggregated(
        cls,
        decode_rids: tuple[str, ...],
        prefill: tuple[PrefillChunk, ...],
        total_sms: int,
        predicted_s: float = 0.0,
        reason: str = "",
    ) -> BatchPlan:
        """One mixed batch on all `total_sms` SMs, predicted to take `predicted_s` seconds."""
        t = predicted_s
        return cls("aggregated", decode_rids, prefill, total_sms, total_sms, 1, t, t, t, reason)

    @classmethod
    def spatial(
        cls,
        decode_rids: tuple[str, ...],
        prefill: tuple[PrefillChunk, ...],
        sms_decode: int,
        sms_prefill: int,
        lookahead: int = 1,
        predicted_decode_s: float = 0.0,
        predicted_prefill_s: float = 0.0,
        predicted_total_s: float | None = None,
        reason: str = "",
    ) -> BatchPlan:
        """Decode (`lookahead` steps of `predicted_decode_s` each) on `sms_decode` SMs beside the
        prefill on `sms_prefill`; the total defaults to max(k * t_d, t_p) seconds."""
        total = predicted_total_s
        if total is None:
            total = max(lookahead * predicted_decode_s, predicted_prefill_s)
        return cls("spatial", decode_rids, prefill, sms_decode, sms_prefill, lookahead, total,
                   predicted_decode_s, predicted_prefill_s, reason)

    @classmethod
    def decode_only(
        cls, decode_rids: tuple[str, ...], total_sms: int, predicted_s: float = 0.0,
        reason: str = "",
    ) -> BatchPlan:
        """One decode step of `decode_rids` on all `total_sms` SMs; prefill waits."""
        t = predicted_s
        return cls("decode_only", decode_rids, (), total_sms, 0, 1, t, t, 0.0, reason)

    @classmethod
    def idle(cls, reason: str = "nothing to run") -> BatchPlan:
        return cls("idle", (), (), 0, 0, 1, 0.0, 0.0, 0.0, reason)


def plan_log_line(plan: BatchPlan, measured_s: float, decode_steps: int, limited: str,
                  discarded: int = 0, *, end_s: float, waiting: int | None = None) -> dict:
    """One plan-log record (`--duet-plan-log`, `sim --plan-log`; `plan_view` draws them): the plan
    as executed plus what was measured, so predicted and measured iteration times can be compared
    offline. `measured_s` is the iteration's time (the runtime: host wall time; the simulator:
    its simulated duration), seconds; `decode_steps` the look-ahead steps the spatial decode ran;
    `limited` why it ran fewer than planned, or ""; `discarded` its surplus tokens, computed after
    a request had finished and never sent; `end_s` the clock when it ended (the runtime: wall
    clock, time.time(); the simulator: simulated seconds), so consecutive lines also give the
    loop's period; `waiting` the requests queued for prefill when it was planned, where known."""
    line = {**plan.to_dict(), "measured_s": measured_s, "decode_steps": decode_steps,
            "discarded": discarded, "lookahead_limited": limited, "end_s": end_s}
    if waiting is not None:
        line["waiting"] = waiting
    return line
