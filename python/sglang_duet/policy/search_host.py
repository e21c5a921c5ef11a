"""What a spatial scheme's search reads from the policy and builds its plans through
(`SearchHost`), and the plan reasons' time format (`ms`). The shared base of `duet` and
`paper_scheme`: the policy hands itself to the paper's search as a `SearchHost`, so the search
module never imports the policy and the imports run one way (duet -> paper_scheme -> here).
Times are seconds, partitions SMs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..latency import Batch, LatencyModel
    from .correction import Correction
    from .optimizer import PartitionOptimizer, SpatialChoice
    from .plan import BatchPlan
    from .sm_menu import SmMenu
    from .state import PrefillChunk

__all__ = ["SearchHost", "ms"]


@runtime_checkable
class SearchHost(Protocol):
    """The policy as a spatial search sees it (`duet.DuetPolicy` is one): its SLO, corrected
    latency model, SM menu and optimizer, and the plan builders that also remember each issued
    plan's correction factors for ``observe``."""

    tbt_slo_s: float  # tau, s
    correction: Correction
    latency: LatencyModel
    menu: SmMenu
    optimizer: PartitionOptimizer
    total_sms: int
    decode_host: str  # the latency model's host kind of one spatial decode step
    vectorised: bool  # score the whole menu in one vectorised prediction
    _prefill_sizes: tuple[int, ...]  # prefill SMs at each menu entry
    _round_trip_s: float  # the CPU round trip a scheduled step pays and a look-ahead one not, s

    def _predict_alone(self, dec: Batch) -> float: ...

    def _decode_only(self, rids: tuple[str, ...], t: float, reason: str) -> BatchPlan: ...

    def _spatial(self, rids: tuple[str, ...], ch: SpatialChoice, f_d: float, f_p: float,
                 reason: str) -> BatchPlan: ...

    def _agg_plan(self, rids: tuple[str, ...], chunks: tuple[PrefillChunk, ...], t: float,
                  reason: str) -> BatchPlan: ...


def ms(t: float) -> str:
    """Seconds as milliseconds for a plan's reason, e.g. ``0.0125`` -> ``"12.5ms"``."""
    return f"{t * 1e3:.1f}ms"
