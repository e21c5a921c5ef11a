"""DuetPolicy: every iteration, aggregated or spatially multiplexed, and with which split.

``plan(decodes, waiting)``:

1. nothing to run -> ``idle``; no running decodes -> ``aggregated`` (the prefill batch alone on
   the whole GPU); decodes but no prompt work -> ``decode_only`` (``aggregated`` in aggregated
   mode).
2. ``aggregated`` mode: plain chunked-prefill batch (``batching.form_chunked_batch``), always.
3. ``adaptive`` mode: predict the mixed chunked-prefill batch on the whole GPU; if it meets the
   TBT SLO tau -> ``aggregated``. Otherwise ``PartitionOptimizer`` looks for a feasible spatial
   plan (decode step t_d <= tau under contention) whose prefill side is a prefill-only batch of
   the same chunks the mixed batch would have held (``token_budget`` minus the decodes, so every
   plan keeps at most ``token_budget`` tokens per forward pass). None feasible: ``decode_only``
   if the decodes alone on the whole GPU meet tau (prefill waits), else the candidate with the
   smallest predicted TBT. From ``backlog.KV_SPLIT_AT`` of the KV pool held (automatic share)
   it plans as the ``spatial`` mode, so decodes never wait out a prefill chunk (`backlog.py`).
4. ``spatial`` mode (tests, experiments): a spatial plan whenever both phases have work -- the
   best feasible one; else, under the gap scheme, the decodes alone when they end a carried
   wait sooner than any split, else the split with the smallest gap, though it misses tau.

Spatial schemes (``scheme``): ``"gap"`` (default, ``gap_optimizer``) bounds the gap a request
sees: the last spatial plan's tail (``carry``) counts against the next plan's first step and
the look-ahead covers the prefill within tau, with a margin learned from the correction's
spread. ``"paper"``: the paper's synchronous scheme (``PartitionOptimizer``, t_d <= tau only).

Predictions are multiplied by the online correction factors (``correction.Correction``) fed by
``observe``. Times are seconds, partitions SMs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..latency import Batch
from .backlog import BACKLOG_AUTO, BACKLOG_DECODE_SHARE, auto_share, check_share, split_only
from .batching import chunk_batch, chunk_waiting
from .correction import Correction
from .gap_optimizer import search_gap
from .optimizer import PartitionOptimizer, SpatialChoice
from .paper_scheme import paper_search
from .plan import BatchPlan
from .search_host import ms
from .sized import LazySized, rate
from .sm_menu import SmMenu
from .state import PrefillChunk, ReqState

if TYPE_CHECKING:
    from ..latency import LatencyModel

POLICY_MODES: tuple[str, ...] = ("adaptive", "aggregated", "spatial")
SPATIAL_SCHEMES: tuple[str, ...] = ("gap", "paper")
OBJECTIVES: dict[str, float] = {"prefill": 0.0, "tokens": 1.0}  # a decode token's weight
_ISSUED_KEEP = 64  # plans whose correction factors are remembered for observe()


class DuetPolicy:
    def __init__(
        self,
        mode: str,
        tbt_slo_s: float,
        token_budget: int = 8192,
        max_lookahead: int = 8,
        latency: LatencyModel | None = None,
        menu: SmMenu | None = None,
        correction: bool = True,
        scheme: str = "gap",
        decode_host: str = "lookahead",
        sized: bool = True,
        objective: str = "prefill",
        backlog_share: float = BACKLOG_DECODE_SHARE,
    ) -> None:
        """``decode_host``: the latency model's host kind of one spatial decode step,
        ``"lookahead"`` (a captured decode graph replayed) or ``"lookahead_eager"`` (no graph
        for the partition); `partition.plan.MenuPlan.decode_host` says which the menu has.
        ``sized``: the gap scheme also weighs the SLO-sized mixed batch (`sized.py`);
        ``objective``: what the gap scheme's split search maximises, ``"prefill"`` tokens per
        second (decode tokens come at the SLO's pace in every feasible plan) or the paper's
        ``"tokens"`` per second (decode and prefill alike). ``backlog_share``: while prompts are
        backlogged, every option's decode step aims at this share of tau (1: tau itself), or
        ``BACKLOG_AUTO``: a share and a split-only rule that follow the KV pool (`backlog.py`)."""
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {tuple(OBJECTIVES)}, got {objective!r}")
        if mode not in POLICY_MODES:
            raise ValueError(f"mode must be one of {POLICY_MODES}, got {mode!r}")
        if scheme not in SPATIAL_SCHEMES:
            raise ValueError(f"scheme must be one of {SPATIAL_SCHEMES}, got {scheme!r}")
        if tbt_slo_s <= 0:
            raise ValueError(f"tbt_slo_s must be > 0, got {tbt_slo_s}")
        check_share(backlog_share)
        if token_budget < 1:
            raise ValueError(f"token_budget must be >= 1, got {token_budget}")
        if latency is None:
            raise TypeError("DuetPolicy needs a LatencyModel (or use DuetPolicy.build)")
        hw = latency.hardware
        if menu is None:
            from ..partition.plan import every_tpc

            menu = every_tpc(hw.num_sms, hw.sms_per_tpc)
        if menu.total_sms != hw.num_sms:
            raise ValueError(f"menu has {menu.total_sms} SMs, {hw.name} has {hw.num_sms}")
        self.mode = mode
        self.scheme = scheme
        self.decode_host = decode_host
        self.sized = sized
        self.objective = objective
        self.backlog_share = float(backlog_share)
        self._carry_s = 0.0  # predicted wait the running decodes start the next iteration with
        self._backlog = False
        self._share = 1.0  # the share this plan aims at while backlogged
        self.tbt_slo_s = float(tbt_slo_s)
        self.token_budget = int(token_budget)
        self.max_lookahead = int(max_lookahead)
        self.latency = latency
        self.menu = menu
        self.total_sms = menu.total_sms
        self.correction = Correction(enabled=correction)
        self.optimizer = PartitionOptimizer(menu, self.tbt_slo_s, self.max_lookahead)
        self._prefill_sizes = tuple(menu.total_sms - s for s in menu.decode_sizes)
        self._whole = (menu.total_sms,)  # the same tuple every call (its floor is cached)
        # the CPU round trip a scheduled decode step pays and a look-ahead step does not (s)
        self._round_trip_s = (latency.host_seconds(True, "scheduled")
                              - latency.host_seconds(True, decode_host))
        # Score the whole menu in one vectorised prediction (and skip shrink evaluations that
        # provably cannot win). False: scalar predictions on demand, the reference path; both
        # give the same plans, bit for bit (tests compare them).
        self.vectorised = True
        self._issued: OrderedDict[int, tuple[BatchPlan, float, float]] = OrderedDict()

    @classmethod
    def build(
        cls,
        mode: str,
        tbt_slo_s: float,
        hardware: str = "h100-sxm",
        model: str = "qwen3-8b",
        tp: int = 1,
        menu: SmMenu | None = None,
        token_budget: int = 8192,
        max_lookahead: int = 8,
        correction: bool = True,
        scheme: str = "gap",
    ) -> DuetPolicy:
        """Policy over the built-in ``LatencyModel(get_hardware(hardware), get_model(model, tp))``;
        default menu: TPC masks of that GPU."""
        from ..latency import LatencyModel, get_hardware, get_model

        latency = LatencyModel(get_hardware(hardware), get_model(model, tp=tp))
        return cls(mode, tbt_slo_s, token_budget, max_lookahead, latency, menu, correction, scheme)

    # --- planning --------------------------------------------------------------------------
    def plan(self, decodes: Sequence[ReqState], waiting: Sequence[ReqState],
             backlog: bool = False, kv_held: bool = False, kv_use: float = 0.0) -> BatchPlan:
        """The plan of the next iteration for the running ``decodes`` and the FIFO ``waiting``
        queue (see the module docstring). Deterministic for the same inputs and factors.
        ``backlog``: the driver holds prompt work back beyond this iteration (token budget or KV
        pool full); the gap scheme then aims every option's decode step at the backlog share of
        tau (fixed, or automatic: `backlog.py`): the mixed batch and the SLO-sized one must fit
        it, and the split search relaxes it towards tau only step by step
        (`gap_optimizer.search_gap`), so running requests finish and free their KV sooner.
        ``kv_use``: the share of KV slots requests hold (0-1); ``kv_held``: the pool holds a
        waiting prompt back (counts as full); the automatic share and split rule follow them."""
        self._backlog = backlog
        share, split = self.backlog_share, False
        if share == BACKLOG_AUTO:
            use = 1.0 if kv_held else kv_use
            share, split = auto_share(use), split_only(use)
        self._share = share
        n_d = len(decodes)
        chunks, completes = chunk_waiting(waiting, self.token_budget - n_d)
        rids = tuple([r.rid for r in decodes])
        if not chunks:
            if n_d == 0:
                return BatchPlan.idle()
            why = "decodes fill the token budget" if _has_prompt(waiting) else "no prompt work"
            dec = _decode_batch(decodes)
            if self.mode == "aggregated":
                return self._aggregated(rids, (), dec, why)
            return self._decode_only(rids, self._predict_alone(dec), why)
        pre = chunk_batch(chunks, None, completes)
        if n_d == 0:
            return self._aggregated(rids, chunks, pre, "no running decodes")
        dec = _decode_batch(decodes)
        if self.mode == "aggregated":
            return self._aggregated(rids, chunks, (dec, pre), "aggregated mode")
        search = self._gap_search if self.scheme == "gap" else self._spatial_search
        if self.mode == "spatial" or (split and self.mode == "adaptive"):
            return search(rids, chunks, dec, completes, pre, None, True, decodes)
        tau = self.tbt_slo_s
        f_agg = self.correction.factor("aggregated", "total")
        if self.scheme == "gap":  # the mixed batch's step comes on top of the carried wait
            tau = tau / self.correction.margin("aggregated", "total") - self._carry_s
        if self._backlog and self.scheme == "gap":  # every option aims at the backlog target
            tau *= self._share
        # The prefill rows alone bound the mixed batch from below: skip building it when they
        # already miss tau (the usual case once spatial plans are needed).
        t_agg: float | None = None
        t_pre = self.latency.predict(pre).total_s * f_agg
        if t_pre <= tau:
            t_agg = self.latency.predict_union(dec, pre).total_s * f_agg
            if t_agg <= tau:
                return self._agg_plan(rids, chunks, t_agg, f"mixed batch meets tau={ms(tau)}")
        if self.scheme != "gap":
            return search(rids, chunks, dec, completes, pre, t_agg, False, decodes)
        sized = None
        if self.sized:  # the largest mixed batch that meets tau, to set against the splits
            sized = LazySized(self.latency, self._whole, dec, chunks, completes, tau, f_agg,
                              t_pre if t_agg is None else t_agg)
        return self._gap_search(rids, chunks, dec, completes, pre, t_agg, False, decodes, sized)

    def _spatial_search(self, rids: tuple[str, ...], chunks: tuple[PrefillChunk, ...], dec: Batch,
                        completes: tuple[bool, ...], pre: Batch, t_agg: float | None,
                        forced: bool, decodes: Sequence[ReqState] = ()) -> BatchPlan:
        """The paper's search (`paper_scheme.paper_search`)."""
        return paper_search(self, rids, chunks, dec, completes, pre, t_agg, forced)

    def _gap_search(self, rids: tuple[str, ...], chunks: tuple[PrefillChunk, ...], dec: Batch,
                    completes: tuple[bool, ...], pre: Batch, t_agg: float | None, forced: bool,
                    decodes: Sequence[ReqState], lazy: LazySized | None = None) -> BatchPlan:
        """The ``gap`` scheme's plan: the best spatial split (``gap_optimizer``) or the SLO-sized
        mixed batch (``lazy``, sized only when it could prefill faster), whichever prefills
        faster; fallbacks as the paper's."""
        corr, carry, big_k = self.correction, self._carry_s, self.max_lookahead
        f_d, f_p = corr.factor("spatial", "decode"), corr.factor("spatial", "prefill")
        tau = self.tbt_slo_s / max(corr.margin("spatial", "decode"),
                                   corr.margin("spatial", "prefill"))
        # decodes alone on the whole GPU: the shortest step after a spatial plan, and (less the
        # host round trip a scheduled step pays) a lower bound of every plan's gap
        alone = self.latency.predict(dec)  # also the sized batch's decodes (lazy.get)
        t_alone = alone.total_s * corr.factor("decode_only", "decode")
        if not forced:
            f_do = corr.factor("decode_only", "decode")
            f_min = min(f_d, corr.factor("aggregated", "total"))
            if carry + t_alone - self._round_trip_s * f_do > tau and f_do <= f_min:
                why = f"nothing keeps the gap <= tau={ms(tau)}; decodes alone, prefill waits"
                return self._decode_only(rids, t_alone, why)
        ch, gap = search_gap(self.latency, self.menu, self._prefill_sizes, dec, pre, chunks,
                             completes, (f_d, f_p), tau, carry, big_k,
                             lambda: _steps_to_finish(decodes, big_k),
                             tau * self._share if self._backlog else tau,
                             self.decode_host, t_alone, OBJECTIVES[self.objective])
        if ch.feasible:
            why = f"gap <= tau={ms(tau)}, k={ch.lookahead}" + (", prefill shrunk" * ch.shrunk)
            sp_rate = rate(sum(c.length for c in ch.prefill), ch.total_s)
            sized = lazy.get(sp_rate, alone) if lazy is not None else None
            if sized is None or rate(sized.tokens, sized.time_s) < sp_rate:
                return self._spatial(rids, ch, f_d, f_p, why)
            return self._agg_plan(rids, sized.chunks, sized.time_s,
                                  f"SLO-sized mixed batch ({sized.tokens} tokens) prefills "
                                  f"faster than the best split ({why})")
        why = f"no split keeps the gap <= tau={ms(tau)}"
        sized = lazy.get(0.0, alone) if lazy is not None else None
        if sized is not None:
            return self._agg_plan(rids, sized.chunks, sized.time_s,
                                  f"{why}; SLO-sized mixed batch ({sized.tokens} tokens)")
        spatial = self._spatial(rids, ch, f_d, f_p, why + "; smallest gap")
        if forced:  # no mixed batch, but decodes alone end a carried wait (a split extends it)
            if carry > 0.0 and carry + t_alone < gap:
                return self._decode_only(rids, t_alone, why + "; decodes alone end the wait")
            return spatial
        if carry + t_alone <= tau:
            return self._decode_only(rids, t_alone, why + "; decodes alone do, prefill waits")
        if t_agg is None:
            t_agg = self.latency.predict_union(dec, pre).total_s * corr.factor("aggregated",
                                                                               "total")
        cands = [(gap, 0, spatial),
                 (carry + t_agg, 1, self._agg_plan(rids, chunks, t_agg, why + "; mixed")),
                 (carry + t_alone, 2, self._decode_only(rids, t_alone, why + "; decodes alone"))]
        return min(cands, key=lambda t: (t[0], t[1]))[2]

    def _predict_alone(self, dec: Batch) -> float:
        """Corrected time of one decode step on the whole GPU."""
        return self.latency.predict(dec).total_s * self.correction.factor("decode_only", "decode")

    # --- plan constructors ------------------------------------------------------------------
    def _aggregated(self, rids: tuple[str, ...], chunks: tuple[PrefillChunk, ...],
                    batch: Batch | tuple[Batch, Batch], reason: str) -> BatchPlan:
        """``batch``: the mixed batch, or its (decode, prefill) parts (predicted as their
        concatenation, without building it)."""
        f = self.correction.factor("aggregated", "total")
        if isinstance(batch, tuple):
            t = self.latency.predict_union(*batch).total_s * f
        else:
            t = self.latency.predict(batch).total_s * f
        return self._agg_plan(rids, chunks, t, reason)

    def _agg_plan(
        self, rids: tuple[str, ...], chunks: tuple[PrefillChunk, ...], t: float, reason: str
    ) -> BatchPlan:
        """An aggregated plan predicted to take ``t`` (corrected) seconds."""
        f = self.correction.factor("aggregated", "total")
        total = self.total_sms
        plan = BatchPlan.aggregated(rids, chunks, total, t, reason)
        return self._remember(plan, f, f)

    def _decode_only(self, rids: tuple[str, ...], t: float, reason: str) -> BatchPlan:
        f = self.correction.factor("decode_only", "decode")
        plan = BatchPlan.decode_only(rids, self.total_sms, t, reason)
        return self._remember(plan, f, 1.0)

    def _spatial(
        self, rids: tuple[str, ...], ch: SpatialChoice, f_d: float, f_p: float, reason: str
    ) -> BatchPlan:
        plan = BatchPlan.spatial(
            rids, ch.prefill, ch.sms_decode, ch.sms_prefill, ch.lookahead,
            predicted_decode_s=ch.decode_s, predicted_prefill_s=ch.prefill_s,
            predicted_total_s=ch.total_s, reason=reason,
        )
        return self._remember(plan, f_d, f_p)

    def _remember(self, plan: BatchPlan, f_a: float, f_b: float) -> BatchPlan:
        """Keep the correction factors a plan was predicted with, so that ``observe`` recovers
        the raw prediction exactly even when factors moved in between (bounded memory)."""
        issued = self._issued
        issued[id(plan)] = (plan, f_a, f_b)
        if len(issued) > _ISSUED_KEEP:
            issued.popitem(last=False)
        return plan

    def _factors_used(self, plan: BatchPlan) -> tuple[float, float]:
        entry = self._issued.get(id(plan))
        if entry is not None and entry[0] is plan:
            return entry[1], entry[2]
        factor = self.correction.factor
        if plan.mode == "aggregated":
            f = factor("aggregated", "total")
            return f, f
        if plan.mode == "decode_only":
            return factor("decode_only", "decode"), 1.0
        return factor("spatial", "decode"), factor("spatial", "prefill")

    # --- correction --------------------------------------------------------------------------
    def observe(
        self,
        plan: BatchPlan,
        measured_s: float,
        decode_s: float | None = None,
        prefill_s: float | None = None,
    ) -> None:
        """Feed back the measured wall time of an executed plan (seconds).

        ``decode_s``: measured time of one decode step (mean over the plan's k steps);
        ``prefill_s``: measured time of the prefill batch. For a spatial plan without them,
        ``measured_s`` is attributed to the phase predicted to be critical (``measured_s / k``
        per decode step, or the prefill batch).
        """
        self._carry_s = 0.0
        if plan.mode == "spatial" and plan.decode_rids and plan.prefill:
            tail = plan.predicted_prefill_s - plan.lookahead * plan.predicted_decode_s
            self._carry_s = tail if tail > 0.0 else 0.0
        if plan.mode == "idle" or not self.correction.enabled:
            return
        f_a, f_b = self._factors_used(plan)
        upd = self.correction.update
        if plan.mode == "aggregated":
            upd("aggregated", "total", measured_s, plan.predicted_total_s / f_a)
        elif plan.mode == "decode_only":
            step = decode_s if decode_s is not None else measured_s / plan.lookahead
            upd("decode_only", "decode", step, plan.predicted_decode_s / f_a)
        else:
            k = plan.lookahead
            raw_d = plan.predicted_decode_s / f_a
            raw_p = plan.predicted_prefill_s / f_b
            if decode_s is None and prefill_s is None:
                if k * plan.predicted_decode_s >= plan.predicted_prefill_s:
                    decode_s = measured_s / k
                else:
                    prefill_s = measured_s
            if decode_s is not None:
                upd("spatial", "decode", decode_s, raw_d)
            if prefill_s is not None:
                upd("spatial", "prefill", prefill_s, raw_p)


# --- helpers ---------------------------------------------------------------------------------
def _has_prompt(waiting: Sequence[ReqState]) -> bool:
    return any(r.prompt_len > r.computed for r in waiting)


def _steps_to_finish(decodes: Sequence[ReqState], cap: int) -> int:
    """Decode steps after which every request in ``decodes`` has finished (>= 1), or ``cap + 1``
    once one needs more than ``cap`` (the split search asks only whether ``cap`` look-ahead
    steps cover them all, so it stops at the first that needs more: usually the first)."""
    most = 1
    for r in decodes:
        if r.max_new_tokens is None:
            return cap + 1
        left = r.max_new_tokens - r.generated
        if left > cap:
            return cap + 1
        if left > most:
            most = left
    return most


def _decode_batch(decodes: Sequence[ReqState]) -> Batch:
    """q = 1 over c = prompt_len + generated - 1 per running decode (see state.py)."""
    return Batch.decode_steps([r.prompt_len + r.generated for r in decodes], offset=-1)
