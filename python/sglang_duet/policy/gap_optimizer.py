"""Spatial split whose TBT bound holds for the gap a request actually sees.

A spatial iteration launches k decode steps (t_d each) on ``S_d`` SMs while one prefill batch
(t_p) runs on the other ``S_p`` SMs, and ends at ``max(k * t_d, t_p)`` (the runtime launches the
k steps back to back, then joins both streams). A running decode therefore sees

* ``carry + t_d`` before its first token of the iteration, where ``carry`` is how long it had
  already waited when the iteration began (the tail of the previous spatial iteration);
* ``t_d`` between its steps;
* across the boundary, the tail ``t_p - k * t_d`` (when the prefill is the longer side) plus the
  next iteration's first step.

A (S_d, k) pair is feasible when ``carry + t_d <= tau`` and ``t_p - k * t_d + t_next <= tau``
with ``t_next = max(t_d, t_alone)``: the next iteration's first step takes at least as long as
this one's or as a scheduled decode step alone on the whole GPU (``t_alone``, what follows when
no prompt work is left; the next plan checks its real first step against the carry the policy
hands it), or when every running decode finishes within the k steps (``k >= k_done``: nobody
waits at the boundary). So the decode side keeps producing tokens for
the whole prefill: k is at least ``ceil((t_p - tau) / t_d) + 1``, capped by K. The paper's
optimizer (``optimizer.PartitionOptimizer``) bounds only ``t_d <= tau``; with ``k * t_d < t_p``
its decodes wait ``t_p - (k - 1) * t_d`` at the boundary.

Among feasible pairs the paper's objective wins, ``(k * n_d + n_p) / max(k * t_d, t_p)`` tokens
per second (ties: fewest decode SMs). For one S_d it peaks at the crossing k = t_p / t_d, so
only ``floor`` and ``ceil`` of it, lifted to the smallest feasible k, are scored; the whole menu
is scored in one numpy pass over the vectorised prediction table, or, for a menu of at most
``small_menu.SMALL_MENU`` entries (the runtime's), by the equal loop there. Times are seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..latency import Batch
from .batching import chunk_batch, truncate_chunks
from .optimizer import SpatialChoice
from .sm_menu import SmMenu
from .small_menu import EPS as _EPS
from .small_menu import SMALL_MENU, best_gap_split_small
from .state import PrefillChunk

if TYPE_CHECKING:
    from ..latency import LatencyModel

__all__ = ["RELAX_STEPS", "best_gap_split", "boundary_gap", "search_gap", "shrink_to_fit"]

# Targets tried between the backlog target and tau (the target, then 1/3 and 2/3 of the way),
# so a split that misses the target keeps the tightest step it can rather than tau's. Measured
# (azure-conv, Qwen3-8B, share 0.3, K 64): capacity 36.9 with one step (straight to tau), 38.8
# with three.
RELAX_STEPS = 3

_SHRINK_STEPS = 6  # predictions at most when sizing a shrunk prefill
_SHRINK_SLACK = 0.98  # aim a little below the boundary so the step usually lands inside


def min_lookahead(t_d: np.ndarray, t_p: np.ndarray, tau: float, t_alone: float = 0.0
                  ) -> np.ndarray:
    """Smallest k with ``t_p - k * t_d + max(t_d, t_alone) <= tau`` (>= 1), per entry."""
    need = np.ceil((t_p - tau + _over(t_d, t_alone)) / t_d - 1e-9) + 1.0
    return np.maximum(need, 1.0)


def _over(t_d, t_alone: float):
    """How much longer than ``t_d`` the step after the boundary can be (>= 0, seconds; a float
    for a float ``t_d``)."""
    if type(t_d) is float:
        over = t_alone - t_d
        return over if over > 0.0 else 0.0
    return np.maximum(t_alone - t_d, 0.0)


def boundary_gap(t_d, t_p, k, t_alone: float = 0.0):
    """The gap across the end of a spatial iteration: its tail plus the next first step."""
    return t_p - (k - 1) * t_d + _over(t_d, t_alone)


def best_gap_split(
    t_d: np.ndarray, t_p: np.ndarray, n_d: int, n_p: int, tau: float, carry: float,
    k_max: int, k_done: int, step_tau: float | None = None, t_alone: float = 0.0,
    decode_weight: float = 1.0,
) -> tuple[int, int, float] | None:
    """``(menu index, k, objective)`` of the best feasible entry (module docstring), or None.

    ``t_d`` / ``t_p``: decode step and prefill batch per menu entry (corrected, under
    contention); ``k_done``: steps after which every running decode has finished;
    ``step_tau``: a tighter bound on the decode step alone (default tau); ``t_alone``: a
    scheduled decode step alone on the whole GPU (the shortest step that can follow);
    ``decode_weight``: what a decode token is worth against a prefill token in the objective
    (1: the paper's tokens per second; 0: prefill tokens per second)."""
    k_cap = float(min(k_max, k_done))
    k_lo = min_lookahead(t_d, t_p, tau, t_alone)
    if k_done <= k_max:
        k_lo = np.minimum(k_lo, float(k_done))
    ok = (t_d + carry <= tau + _EPS) & (k_lo <= k_cap)
    if step_tau is not None and step_tau < tau:
        ok &= t_d <= step_tau + _EPS
    if not ok.any():
        return None
    k1 = np.clip(np.floor(t_p / t_d), k_lo, k_cap)
    k2 = np.minimum(k1 + 1.0, k_cap)
    w = decode_weight * n_d
    o1 = (k1 * w + n_p) / np.maximum(k1 * t_d, t_p)
    o2 = (k2 * w + n_p) / np.maximum(k2 * t_d, t_p)
    better = o2 > o1
    obj = np.where(ok, np.where(better, o2, o1), -1.0)
    i = int(np.argmax(obj))  # first maximum: fewest decode SMs
    k = k2[i] if better[i] else k1[i]
    return i, int(k), float(obj[i])


def shrink_to_fit(
    i: int, sms_d: int, sms_p: int, chunks: tuple[PrefillChunk, ...], n_d: int, t_d: float,
    t_p: float, tau: float, k_cap: int,
    evaluate: Callable[[tuple[PrefillChunk, ...]], tuple[float, float]], step_max: float = 1e30,
    t_alone: float = 0.0,
) -> SpatialChoice | None:
    """The longest FIFO prefix of ``chunks`` (within a few predictions) that k_cap decode steps
    cover within tau (``boundary_gap(t_d', t_p', k_cap) <= tau``) at menu entry i; None when none is
    found. ``evaluate(prefix) -> (t_d, t_p)``. The size is searched by regula falsi on the
    boundary gap between a feasible (0 tokens) and an infeasible (all tokens) bracket: t_p is
    not proportional to tokens (a chunk deep into a long prompt costs more per token); where
    that finds no fit, by bisection (as many predictions again)."""
    n_p = sum(c.length for c in chunks)

    def excess(td: float, tp: float) -> float:
        return float(boundary_gap(td, tp, k_cap, t_alone)) - tau

    lo, f_lo = 0, excess(t_d, 0.0)  # no prefill: the decodes alone, feasible when t_d <= tau
    hi, f_hi = n_p, excess(t_d, t_p)
    if f_lo > _EPS or f_hi <= _EPS:
        return None
    found: tuple[int, float, float, tuple[PrefillChunk, ...]] | None = None

    def probe(size: int) -> None:  # ``step_max``: the step's own bound (tau less the carry)
        nonlocal lo, f_lo, hi, f_hi, found
        prefix = truncate_chunks(chunks, size)
        td, tp = evaluate(prefix)
        f = excess(td, tp)
        if f <= _EPS and td <= step_max + _EPS:
            lo, f_lo, found = size, f, (size, td, tp, prefix)
        else:
            hi, f_hi = size, f

    for _ in range(_SHRINK_STEPS):
        size = lo + (hi - lo) * (-f_lo) / (f_hi - f_lo) * _SHRINK_SLACK
        size = min(hi - 1, max(lo + 1, int(size)))
        if size <= lo:
            break
        probe(size)
        if hi - lo <= max(1, n_p // 64):
            break
    # Regula falsi keeps its feasible end when the gap is concave in the size (a chunk deep
    # into a long prompt first holds most of t_p) and can end with nothing: bisect then.
    for _ in range(_SHRINK_STEPS if found is None else 0):
        size = (lo + hi) // 2
        if size <= lo:
            break
        probe(size)
    if found is None:
        return None
    size, td, tp, prefix = found
    k = int(min(k_cap, max(np.ceil(tp / td - 1e-9), 1.0)))
    k = max(k, int(min_lookahead(np.array([td]), np.array([tp]), tau, t_alone)[0]))
    obj = (k * n_d + size) / max(k * td, tp)
    return SpatialChoice(sms_d, sms_p, k, prefix, td, tp, obj, True, True)


def search_gap(
    lat: LatencyModel, menu: SmMenu, prefill_sizes: tuple[int, ...], dec: Batch, pre: Batch,
    chunks: tuple[PrefillChunk, ...],
    completes: tuple[bool, ...], factors: tuple[float, float], tau: float, carry: float,
    k_max: int, k_done: Callable[[], int], step_tau: float | None = None,
    decode_host: str = "lookahead", t_alone: float = 0.0, decode_weight: float = 1.0,
) -> tuple[SpatialChoice, float]:
    """The spatial choice for decode batch ``dec`` and prefill ``pre`` (its FIFO ``chunks``)
    and its predicted worst gap (seconds): the best feasible split; else, at the smallest decode
    size whose step meets tau, a shrunk prefill that fits; else (``feasible=False``) the entry
    with the smallest gap. ``prefill_sizes``: ``total - S_d`` per menu entry, the same tuple
    every call (the latency model caches by identity); ``factors``: correction of (t_d, t_p);
    ``k_done()``: steps after which every decode has finished, or any number above ``k_max``
    when one needs more (asked only when K steps cannot cover the prefill); ``step_tau``: the
    decode step target when tighter than tau, tried first, then ``RELAX_STEPS - 1`` targets
    between it and tau, then tau alone; ``decode_host``: the decode step's host kind;
    ``t_alone``: a scheduled decode step of ``dec`` alone on the whole GPU (corrected);
    ``decode_weight``: as in `best_gap_split`."""
    f_d, f_p = factors
    sizes, total = menu.decode_sizes, menu.total_sms
    if len(sizes) <= SMALL_MENU:  # the same values, without numpy's per-call overhead
        d_s, p_s = lat.predict_concurrent_lists(dec, pre, sizes, prefill_sizes, decode_host)
        split, t_d, t_p = best_gap_split_small, [t * f_d for t in d_s], [t * f_p for t in p_s]
    else:
        tab = lat.predict_concurrent_table(dec, pre, sizes, prefill_sizes, decode_host)
        split, t_d, t_p = best_gap_split, tab.decode_s * f_d, tab.prefill_s * f_p
    n_d, n_p = len(dec), sum(c.length for c in chunks)
    best = None
    if step_tau is not None and step_tau < tau:  # the target, relaxed towards tau in steps
        for j in range(RELAX_STEPS):
            target = step_tau + (tau - step_tau) * j / RELAX_STEPS
            best = split(t_d, t_p, n_d, n_p, tau, carry, k_max, 1 << 30, target, t_alone,
                         decode_weight)
            if best is not None:
                break
    if best is None:
        best = split(t_d, t_p, n_d, n_p, tau, carry, k_max, 1 << 30, None, t_alone,
                     decode_weight)
    if best is None:
        done = k_done()
        if done <= k_max:
            best = split(t_d, t_p, n_d, n_p, tau, carry, k_max, done, None, t_alone,
                         decode_weight)
    if best is not None:
        i, k, obj = best
        ch = SpatialChoice(sizes[i], total - sizes[i], k, chunks, float(t_d[i]),
                           float(t_p[i]), obj, True)
        return ch, max(carry + ch.decode_s, boundary_gap(ch.decode_s, ch.prefill_s, k, t_alone))
    td, tp = np.asarray(t_d, np.float64), np.asarray(t_p, np.float64)
    step_ok = np.nonzero(td + carry <= tau + _EPS)[0]
    if step_ok.size and n_p > 1:
        i = int(step_ok[0])
        sd, sp = sizes[i], total - sizes[i]

        def evaluate(prefix: tuple[PrefillChunk, ...]) -> tuple[float, float]:
            pb = chunk_batch(prefix, chunks, completes)
            bd, bp = lat.predict_concurrent(dec, pb, sd, sp, decode_host)
            return bd.total_s * f_d, bp.total_s * f_p

        ch = shrink_to_fit(i, sd, sp, chunks, n_d, float(td[i]), float(tp[i]), tau, k_max,
                           evaluate, tau - carry, t_alone)
        if ch is not None:
            return ch, max(carry + ch.decode_s, float(boundary_gap(
                ch.decode_s, ch.prefill_s, ch.lookahead, t_alone)))
    k_lo = np.minimum(min_lookahead(td, tp, tau, t_alone), float(k_max))
    gap = np.maximum(carry + td, boundary_gap(td, tp, k_lo, t_alone))
    i = int(np.argmin(gap))
    k = int(k_lo[i])
    obj = (k * n_d + n_p) / max(k * float(td[i]), float(tp[i]))
    ch = SpatialChoice(sizes[i], total - sizes[i], k, chunks, float(td[i]), float(tp[i]), obj,
                       False)
    return ch, float(gap[i])
