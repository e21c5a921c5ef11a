"""PartitionOptimizer: the SM split, look-ahead and prefill size of a spatial plan.

A spatial plan runs a decode-only batch on ``S_d`` SMs for k steps while one prefill-only batch
runs on the other ``S_p = total - S_d`` SMs. With t_d the decode step and t_p the prefill batch,
both predicted under contention (``LatencyModel.predict_concurrent``) and multiplied by the
policy's correction factors:

* feasible  <=>  t_d <= tau            (t_d does not depend on k)
* objective  =  (k * n_decode + n_prefill_tokens) / max(k * t_d, t_p)    tokens per second

Search (few latency calls): t_d falls as S_d grows, so the smallest feasible S_d -- the one
leaving most SMs to prefill -- is found by a galloping binary search started at the previous
call's answer. For a fixed k the objective peaks where k * t_d (falling) meets t_p (rising), so
above the boundary only those crossings (one galloping search per k, hinted likewise) and their
neighbours are scored; k itself is scanned in scalar arithmetic. When even k = K decode steps
end before the prefill batch, a shorter prefill (FIFO prefix of the chunks) sized to fit in
K * t_d is tried and kept if it raises the objective.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from .batching import truncate_chunks
from .sm_menu import SmMenu
from .state import PrefillChunk

# (sms_decode, prefill chunks) -> (t_d, t_p) in seconds, corrected, under contention.
Evaluate = Callable[[int, tuple[PrefillChunk, ...]], tuple[float, float]]

_SHRINK_STEPS = 3  # secant refinements when sizing a shrunk prefill batch
_SHRINK_SLACK = 0.98  # aim a little below K * t_d so the refined size usually fits
_BOUND_MARGIN = 1e-9  # relative slack on the shrink bound for floating-point rounding


class SpatialChoice(NamedTuple):
    """One evaluated spatial candidate (times in seconds, objective in tokens per second; a
    NamedTuple: built every plan)."""

    sms_decode: int
    sms_prefill: int
    lookahead: int
    prefill: tuple[PrefillChunk, ...]
    decode_s: float
    prefill_s: float
    objective: float
    feasible: bool
    shrunk: bool = False

    @property
    def total_s(self) -> float:
        return max(self.lookahead * self.decode_s, self.prefill_s)


def best_lookahead(
    n_decode: int, n_prefill: int, t_d: float, t_p: float, max_lookahead: int
) -> tuple[int, float]:
    """The k in 1..K maximising (k*n_decode + n_prefill) / max(k*t_d, t_p); ties -> smaller k."""
    best_k, best_obj = 1, -1.0
    for k in range(1, max_lookahead + 1):
        span = k * t_d
        if span < t_p:  # max(k * t_d, t_p) without the call
            span = t_p
        obj = (k * n_decode + n_prefill) / span if span > 0.0 else 0.0
        if obj > best_obj:
            best_k, best_obj = k, obj
    return best_k, best_obj


class PartitionOptimizer:
    """Chooses the spatial plan for one iteration; see the module docstring.

    ``tbt_slo_s`` is tau in seconds; ``max_lookahead`` is K (>= 1); ``shrink`` enables the
    prefill-shrinking step. The only state kept between calls are search hints (the last
    feasibility boundary and the last k*t_d = t_p crossings); they change how many predictions a
    call makes, not its answer, as long as t_d falls and t_p rises with S_d (true of the
    built-in latency model).
    """

    def __init__(
        self, menu: SmMenu, tbt_slo_s: float, max_lookahead: int = 4, shrink: bool = True
    ) -> None:
        if tbt_slo_s <= 0:
            raise ValueError(f"tbt_slo_s must be > 0, got {tbt_slo_s}")
        if max_lookahead < 1:
            raise ValueError(f"max_lookahead must be >= 1, got {max_lookahead}")
        self.menu = menu
        self.tbt_slo_s = tbt_slo_s
        self.max_lookahead = max_lookahead
        self.shrink = shrink
        self._hint_boundary = 0
        self._hint_cross = [0] * max_lookahead

    # --- search ----------------------------------------------------------------------------
    def optimize(
        self,
        n_decode: int,
        chunks: tuple[PrefillChunk, ...],
        evaluate: Evaluate,
        exhaustive: bool = False,
        table: tuple[Sequence[float], Sequence[float]] | None = None,
        floor: Callable[[int], tuple[float, float]] | None = None,
    ) -> SpatialChoice:
        """Best feasible spatial choice for ``n_decode`` decodes and the FIFO ``chunks``.

        ``evaluate(S_d, chunks)`` returns the corrected ``(t_d, t_p)`` (seconds). The smallest
        feasible menu index b is found first; above it, for each k the S_d where k*t_d crosses t_p
        (and the entry below) are the only candidates; the best objective wins (ties: fewer
        decode SMs). Without shrinking this equals a full scan of the feasible menu. When no S_d
        is feasible the result has ``feasible=False``: with ``exhaustive=False`` it is the
        candidate with the smallest t_d (largest S_d); with ``exhaustive=True`` the best
        objective over the whole menu.

        ``table``: optional ``(t_d, t_p)`` of the full ``chunks`` at every menu entry, equal to
        what ``evaluate`` returns (e.g. one vectorised prediction of the whole menu); the search
        then reads it instead of calling ``evaluate``, which remains for shrunk prefill batches.
        The answer is the same either way.

        ``floor``: optional ``i -> (a, r)`` with, for every prefill batch ``evaluate`` may be
        asked about at menu entry i, ``t_d >= a`` and ``t_p >= r * tokens`` (e.g. the decodes
        alone, and the prefill's token-level compute alone). Candidates that a shrunk prefill
        provably cannot make the best are then not shrunk; the answer is the same.
        """
        sizes = self.menu.decode_sizes
        n = len(sizes)
        tau = self.tbt_slo_s
        big_k = self.max_lookahead
        cache: dict[tuple[int, int], tuple[float, float]] = {}
        n_p = sum(c.length for c in chunks)
        if table is not None:
            td, tp = table
            if not len(td) == len(tp) == n:
                raise ValueError(f"table has {len(td)}/{len(tp)} entries, menu has {n}")
        else:  # filled on demand from evaluate
            td, tp = [0.0] * n, [0.0] * n
            known = [False] * n

        def ev(i: int, ch: tuple[PrefillChunk, ...], n_tok: int) -> tuple[float, float]:
            if n_tok == n_p:  # the full chunks (a shrunk batch has fewer tokens)
                if table is None and not known[i]:
                    td[i], tp[i] = evaluate(sizes[i], ch)
                    known[i] = True
                return td[i], tp[i]
            key = (i, n_tok)
            hit = cache.get(key)
            if hit is None:
                hit = cache[key] = evaluate(sizes[i], ch)
            return hit

        if table is None:
            def feasible(i: int) -> bool:
                return ev(i, chunks, n_p)[0] <= tau

            def crossed(i: int, k: int) -> bool:
                t_d, t_p = ev(i, chunks, n_p)
                return k * t_d <= t_p
        else:
            def feasible(i: int) -> bool:
                return td[i] <= tau

            def crossed(i: int, k: int) -> bool:
                return k * td[i] <= tp[i]

        boundary = _first_true(0, n, feasible, self._hint_boundary)
        if boundary is None:
            self._hint_boundary = n - 1
            if exhaustive:
                return max((self._choice(n_decode, i, chunks, n_p, ev) for i in range(n)),
                           key=lambda c: c.objective)
            return self._choice(n_decode, n - 1, chunks, n_p, ev)
        self._hint_boundary = boundary
        # For a fixed k the objective's numerator does not depend on S_d and its denominator
        # max(k*t_d, t_p) is smallest where the falling k*t_d crosses the rising t_p: the best
        # S_d for k is the crossing index c_k or the one below it. c_k grows with k.
        cands = {boundary}
        lo = boundary
        hints = self._hint_cross
        for k in range(1, big_k + 1):
            c = _first_true(lo, n, lambda i, k=k: crossed(i, k), hints[k - 1])
            if c is None:  # decode-critical up to the last entry (and so for every larger k)
                hints[k - 1 :] = [n - 1] * (big_k - k + 1)
                cands.add(n - 1)
                break
            hints[k - 1] = c
            cands.add(c)
            if c > boundary:
                cands.add(c - 1)
            lo = c
        # The best objective wins, ties: fewer decode SMs. A candidate whose prefill outlasts K
        # decode steps may improve by shrinking (_choice); the others score without it.
        # A candidate whose bound shows no shrunk batch can reach the best unshrunk objective
        # of the others keeps its unshrunk score (it cannot win either way).
        shrink = self.shrink and n_p > 1
        scored = []
        top = -1.0  # best objective among candidates that do not shrink
        for i in sorted(cands):
            t_d, t_p = ev(i, chunks, n_p)
            obj = best_lookahead(n_decode, n_p, t_d, t_p, big_k)[1]
            grows = shrink and t_p > big_k * t_d
            scored.append((i, obj, grows))
            if not grows and obj > top:
                top = obj
        best_i, best_obj, best_choice = -1, -1.0, None
        for i, obj, grows in scored:
            ch = None
            if grows and not (floor is not None and self._cannot_reach(n_decode, n_p, obj,
                                                                        floor(i), top)):
                ch = self._choice(n_decode, i, chunks, n_p, ev)
                obj = ch.objective
            if obj > best_obj or best_i < 0:
                best_i, best_obj, best_choice = i, obj, ch
        if best_choice is None:
            best_choice = self._choice(n_decode, best_i, chunks, n_p, ev)
        return best_choice

    def _cannot_reach(self, n_decode: int, n_p: int, obj: float, floor: tuple[float, float],
                      top: float) -> bool:
        """Whether neither the unshrunk objective ``obj`` nor any shrunk prefill batch (1 to
        n_p - 1 tokens) at this entry can reach ``top``, given ``floor = (a, r)``: every
        evaluation there has t_d >= a and t_p >= r * (its prefill tokens).

        For k steps and s tokens the objective is at most (k*n_d + s) / max(k*a, s*r), which
        grows with s up to s = k*a/r and falls after it."""
        a, r = floor
        if top <= 0.0 or a <= 0.0 or obj >= top:
            return False
        bound = 0.0
        for k in range(1, self.max_lookahead + 1):
            s = float(n_p - 1)
            if r > 0.0:
                s = min(s, max(1.0, k * a / r))
            bound = max(bound, (k * n_decode + s) / max(k * a, s * r))
        return bound * (1.0 + _BOUND_MARGIN) < top

    # --- one S_d ---------------------------------------------------------------------------
    def _choice(
        self,
        n_decode: int,
        i: int,
        chunks: tuple[PrefillChunk, ...],
        n_p: int,
        ev: Callable[[int, tuple[PrefillChunk, ...], int], tuple[float, float]],
    ) -> SpatialChoice:
        sms_d = self.menu.decode_sizes[i]
        total = self.menu.total_sms
        big_k = self.max_lookahead
        t_d, t_p = ev(i, chunks, n_p)
        k, obj = best_lookahead(n_decode, n_p, t_d, t_p, big_k)
        best = SpatialChoice(sms_d, total - sms_d, k, chunks, t_d, t_p, obj, t_d <= self.tbt_slo_s)
        if not self.shrink or n_p <= 1 or t_p <= big_k * t_d:
            return best
        # Shrink the prefill batch to fit in K decode steps (secant steps on its size).
        target = big_k * t_d * _SHRINK_SLACK
        size, t_cur = n_p, t_p
        shrunk: tuple[PrefillChunk, ...] | None = None
        for _ in range(_SHRINK_STEPS):
            size = max(1, min(n_p - 1, int(size * target / t_cur)))
            shrunk = truncate_chunks(chunks, size)
            t_d2, t_cur = ev(i, shrunk, size)
            if t_cur <= big_k * t_d2:
                break
        if shrunk is None:
            return best
        t_d2, t_p2 = ev(i, shrunk, size)
        k2, obj2 = best_lookahead(n_decode, size, t_d2, t_p2, big_k)
        feas2 = t_d2 <= self.tbt_slo_s
        if (feas2, obj2) > (best.feasible, best.objective):
            return SpatialChoice(sms_d, total - sms_d, k2, shrunk, t_d2, t_p2, obj2, feas2, True)
        return best


def _first_true(lo: int, n: int, pred: Callable[[int], bool], hint: int) -> int | None:
    """Smallest i in [lo, n) with pred(i), for pred monotone (False ... False True ... True);
    None when pred(n - 1) is False. Gallops from ``hint``: when the answer has not moved it
    costs two calls of pred, otherwise O(log distance)."""
    if lo >= n:
        return None
    h = min(max(hint, lo), n - 1)
    step = 1
    if pred(h):
        bad, good = lo - 1, h  # pred(bad) False (or bad below range), pred(good) True
        while good - step >= lo:
            cand = good - step
            if not pred(cand):
                bad = cand
                break
            good, step = cand, step * 2
    else:
        bad = h
        while True:
            cand = bad + step
            if cand >= n - 1:
                if bad == n - 1 or not pred(n - 1):
                    return None
                good = n - 1
                break
            if pred(cand):
                good = cand
                break
            bad, step = cand, step * 2
    while good - bad > 1:
        mid = (good + bad) // 2
        if pred(mid):
            good = mid
        else:
            bad = mid
    return good
