"""The paper's synchronous spatial scheme (`DuetPolicy(scheme="paper")`): a split is feasible when
its decode step meets tau (``t_d <= tau``), k look-ahead steps run, and the decodes then wait for
the longer prefill (`optimizer.PartitionOptimizer`). Kept to reproduce the distance from the
paper's design (sim policy ``duet-paper``); the default is the gap scheme (`gap_optimizer`).
The policy hands itself in as a `search_host.SearchHost`: this module never imports `duet`.
Times are seconds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..latency import Batch
from .batching import chunk_batch
from .plan import BatchPlan
from .search_host import ms
from .state import PrefillChunk

if TYPE_CHECKING:
    from .search_host import SearchHost

__all__ = ["paper_search", "scaled"]


def paper_search(pol: SearchHost, rids: tuple[str, ...], chunks: tuple[PrefillChunk, ...],
                 dec: Batch, completes: tuple[bool, ...], pre: Batch, t_agg: float | None,
                 forced: bool) -> BatchPlan:
    """The paper's search. ``t_agg``: the mixed batch's corrected time when predicted."""
    tau = pol.tbt_slo_s
    factor = pol.correction.factor
    f_d, f_p = factor("spatial", "decode"), factor("spatial", "prefill")
    f_do, f_agg = factor("decode_only", "decode"), factor("aggregated", "total")
    t_alone = 0.0
    if not forced:
        # Decodes alone on the whole GPU bound every plan's TBT from below (fewer SMs and
        # contention only slow them down): when even that misses tau, skip the search.
        t_alone = pol._predict_alone(dec)
        # ... less the CPU round trip a scheduled step pays and a look-ahead step does not
        if t_alone - pol._round_trip_s * f_do > tau and f_do <= min(f_d, f_agg):
            why = f"nothing meets tau={ms(tau)}; decodes alone (smallest TBT), prefill waits"
            return pol._decode_only(rids, t_alone, why)
    lat = pol.latency
    predict_concurrent = lat.predict_concurrent
    total = pol.total_sms
    batches: dict[int, Batch] = {sum(c.length for c in chunks): pre}
    table = floor = None
    if pol.vectorised:
        # the whole menu in one pass (bit-equal to predict_concurrent at every entry)
        tab = lat.predict_concurrent_table(dec, pre, pol.menu.decode_sizes,
                                           pol._prefill_sizes, pol.decode_host)
        table = (scaled(tab.decode_s, f_d), scaled(tab.prefill_s, f_p))
        alone_d = tab.decode_alone_s

        def floor(i: int) -> tuple[float, float]:
            """Lower bounds of t_d and of t_p per prefill token at entry i, for any
            prefill batch: contention only slows either side down."""
            rate = lat.token_seconds_floor(pol._prefill_sizes)
            return float(alone_d[i]) * f_d, float(rate[i]) * f_p

    def evaluate(sms_d: int, ch: tuple[PrefillChunk, ...]) -> tuple[float, float]:
        n_tok = sum(c.length for c in ch)
        pb = batches.get(n_tok)
        if pb is None:  # a shrunk FIFO prefix: its last chunk no longer completes
            pb = batches[n_tok] = chunk_batch(ch, chunks, completes)
        bd, bp = predict_concurrent(dec, pb, sms_d, total - sms_d, pol.decode_host)
        return bd.total_s * f_d, bp.total_s * f_p

    choice = pol.optimizer.optimize(len(rids), chunks, evaluate, forced, table, floor)
    if choice.feasible:
        why = f"t_d={ms(choice.decode_s)} <= tau={ms(tau)}"
        if not forced:
            why = f"mixed batch > tau={ms(tau)}; " + why
        if choice.shrunk:
            why += "; prefill shrunk to fit k decode steps"
        return pol._spatial(rids, choice, f_d, f_p, why)
    if forced:
        why = f"forced spatial; no split meets tau={ms(tau)} (t_d={ms(choice.decode_s)})"
        return pol._spatial(rids, choice, f_d, f_p, why)
    if t_alone <= tau:
        why = f"no split meets tau={ms(tau)}; decodes alone do, prefill waits"
        return pol._decode_only(rids, t_alone, why)
    # Nothing meets tau: smallest predicted TBT (ties: the plan that also prefills).
    why = f"nothing meets tau={ms(tau)}; smallest predicted TBT"
    if t_agg is None:
        t_agg = pol.latency.predict_union(dec, pre).total_s * f_agg
    agg = pol._agg_plan(rids, chunks, t_agg, why)
    cands: list[tuple[float, int, BatchPlan]] = [
        (choice.decode_s, 0, pol._spatial(rids, choice, f_d, f_p, why)),
        (agg.predicted_total_s, 1, agg),
        (t_alone, 2, pol._decode_only(rids, t_alone, why)),
    ]
    return min(cands, key=lambda t: (t[0], t[1]))[2]


def scaled(times, factor: float) -> list[float]:
    """``times * factor`` as floats (a factor of 1 changes no value: skip the multiply)."""
    return (times if factor == 1.0 else times * factor).tolist()
