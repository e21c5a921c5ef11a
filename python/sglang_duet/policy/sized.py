"""SLO-sized aggregated iterations: the mixed batch with the most prefill tokens that meets tau.

A fixed token budget (Sarathi-Serve, SGLang's ``--chunked-prefill-size``) is a blind proxy for
an iteration's time: the same 2048 tokens take far longer as a chunk deep into a 32K prompt
(attention over the cached prefix) or next to 200 long-context decodes than as a fresh short
prompt. The attention-aware model predicts the mixed iteration of the running decodes plus any
FIFO prefix of the waiting chunks, so the policy can size the prefix to the step bound instead:
the largest prefix whose corrected time stays within it. Its time grows with the prefix (token
operators linearly, attention faster for deep chunks), so `size_aggregated` finds it by regula
falsi on ``t(P) - bound`` between P = 0 (the decodes alone, feasible or there is no aggregated
option) and all the chunks (infeasible, else the caller had taken the whole batch), within
``_STEPS`` predictions, and rounds it down to ``ALIGN`` tokens (a chunk size SGLang pages and
kernels like; smaller prefixes stay exact).

`rate` is what the policy compares options by: prefill tokens per second of the iteration. At
a load near capacity the waiting prompts decide TTFT, and every option considered keeps each
running request's gap within tau, so decode tokens come at the SLO's pace whichever wins.
Times are seconds, sizes tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from math import sqrt
from typing import TYPE_CHECKING

from ..latency import Batch
from .batching import chunk_rows, truncate_chunks
from .state import PrefillChunk

if TYPE_CHECKING:
    from ..latency import Breakdown, LatencyModel

__all__ = ["ALIGN", "LazySized", "Sized", "rate", "rate_bound", "size_aggregated"]

ALIGN = 64
_STEPS = 4
_SLACK = 0.97  # aim a little inside the bound so the step usually lands within it


class Sized:
    """A sized aggregated candidate: its chunks, tokens and corrected predicted time (s)."""

    __slots__ = ("chunks", "tokens", "time_s")

    def __init__(self, chunks: tuple[PrefillChunk, ...], tokens: int, time_s: float) -> None:
        self.chunks, self.tokens, self.time_s = chunks, tokens, time_s


def rate(tokens: int, seconds: float) -> float:
    """Prefill tokens per second (0 for an empty or instant iteration)."""
    return tokens / seconds if tokens and seconds > 0.0 else 0.0


def size_aggregated(
    lat: LatencyModel, dec: Batch, chunks: tuple[PrefillChunk, ...], completes: tuple[bool, ...],
    bound_s: float, factor: float, t_none: float, t_all_floor: float,
) -> Sized | None:
    """The longest FIFO prefix of ``chunks`` whose mixed iteration with the decodes ``dec``
    takes at most ``bound_s`` (times ``factor``, the aggregated correction), or None when no
    non-empty prefix fits. ``t_none``: the decodes alone (corrected); ``t_all_floor``: a lower
    bound of the whole batch's corrected time (> ``bound_s``: the caller found it over)."""
    n = sum(c.length for c in chunks)
    if n <= 1 or t_none >= bound_s:
        return None
    first = chunks[0]

    def predict(size: int) -> float:
        if size < first.length:  # one row inside the first chunk, never its prompt's last
            return lat.total_with_rows(dec, [size], [first.start], 0) * factor
        prefix = truncate_chunks(chunks, size)
        return lat.total_with_rows(dec, *chunk_rows(prefix, chunks, completes)) * factor

    found = _search(n, t_none - bound_s, t_all_floor - bound_s, bound_s, predict)
    if found is None:
        return None
    size, t = found
    return Sized(truncate_chunks(chunks, size), size, t)


def _search(n: int, f_lo: float, f_hi: float, bound_s: float,
            predict: Callable[[int], float]) -> tuple[int, float] | None:
    """(the largest size found whose ``predict(size) <= bound_s``, its time), or None."""
    lo, hi = 0, n
    found: tuple[int, float] | None = None
    for _ in range(_STEPS):
        if hi - lo > ALIGN:  # regula falsi, rounded down to ALIGN tokens
            size = int(lo + (hi - lo) * (-f_lo) / max(f_hi - f_lo, 1e-12) * _SLACK)
            if size > ALIGN:
                size -= size % ALIGN
        else:  # under one ALIGN step (short prompts): sizes stay exact, bisect
            size = (lo + hi) // 2
        size = min(hi - 1, max(lo + 1, size))
        if size <= lo:
            break
        t = predict(size)
        if t <= bound_s:
            lo, f_lo, found = size, t - bound_s, (size, t)
        else:
            hi, f_hi = size, t - bound_s
        if hi - lo <= max(ALIGN if hi > ALIGN else 1, n // 64):
            break
    return found


def rate_bound(lat: LatencyModel, alone: Breakdown, n_d: int, chunks: tuple[PrefillChunk, ...],
               n: int, bound_s: float, factor: float, near: int) -> float:
    """An upper bound of ``P / t(P)`` over every prefix of P <= ``n`` prefill tokens whose mixed
    iteration with the ``n_d`` decodes (``alone``: theirs on the whole GPU, uncorrected) takes
    ``t(P) <= bound_s`` (``factor``: the aggregated correction), ``chunks`` the FIFO chunks;
    ``near``: a prefill size near the largest that fits (where the bound should be tight; the
    tangent is taken at a multiple of ``ALIGN`` tokens next to it).

    t(P) is at least ``LB(P) = a + b * P + beta * A(P)``: ``a``, the decodes' step without its
    token operators and all-reduce and with a mixed batch's host time, plus the token operators'
    tangent at ``n_d + near`` tokens taken at n_d; ``b``, that tangent's slope; ``beta``,
    attention compute per key (`LatencyModel.growth_floor`); ``A(P)``, keys the prefill attends,
    at least the first chunk's ``P * s + P * (P + 1) / 2`` (cached prefix s) while P is within
    it and its whole chunk's after. Every P with t(P) <= bound has LB(P) <= bound, so P is at
    most LB's root; ``P / (a + B * P + C * P * P)`` peaks at ``sqrt(a / C)``; past the first
    chunk LB is linear and P / LB rises. A prefix of one-token rows only (P = 1, and up to the
    first chunk longer than a token) runs in the decode kernel with a decode-only batch's host
    time, below a mixed batch's: those P take at least the decodes' step alone, so P / t(P) is
    at most P over it. Raised by 1e-9 against rounding: a split whose rate it does not exceed
    prefills faster than any sized batch, so skipping the search never changes a plan
    (test/policy/test_sized.py)."""
    at = (n_d + near) // ALIGN * ALIGN  # any tangent bounds: a few, reused across plans
    tok, slope, key = lat.growth_floor(at)
    near = at - n_d
    host = lat.host_seconds(False, "scheduled", n_d)
    rest = alone.total_s - alone.token_ops_s - alone.comm_s - alone.host_s + host
    a = (rest + tok - slope * near) * factor  # the tangent at n_d: >= 0 (each operator's is)
    b, beta = slope * factor, key * factor
    ones = 1  # P up to here can be one-token rows only: a decode-only pass
    while ones < len(chunks) and chunks[ones - 1].length == 1:
        ones += 1
    ones_rate = min(ones, n) / (alone.total_s * factor)
    room = bound_s - a
    if a <= 0.0 or b <= 0.0:
        return float("inf")
    if room <= 0.0:
        return ones_rate * (1.0 + 1e-9)
    s, length = chunks[0].start, chunks[0].length
    big_b, c = b + beta * (s + 0.5), 0.5 * beta  # LB within the first chunk: a + B P + C P^2
    root = 2.0 * room / (big_b + sqrt(big_b * big_b + 4.0 * c * room))
    peak = sqrt(a / c) if c > 0.0 else float("inf")
    p = min(peak, root, length, n)
    best = p / (a + big_b * p + c * p * p)
    if root > length and n > length:  # LB = a2 + b P past the first chunk: P / LB rises
        a2 = a + beta * (length * s + length * (length + 1) / 2)
        p = min(float(n), (bound_s - a2) / b)
        if p > length:
            best = max(best, p / (a2 + b * p))
    return max(best, ones_rate) * (1.0 + 1e-9)


class LazySized:
    """The SLO-sized mixed batch, sized (a few predictions) only when it could beat a rate.

    A mixed batch of the decodes and P prefill tokens takes at least the decodes' attention and
    host time plus every token's (decode and prefill) token-operator compute floor
    (``LatencyModel.token_seconds_floor``): the other terms only add. So P is at most what that
    leaves within the bound, and the prefill rate at most ``P / (fixed + (n_d + P) * floor)``.
    That bound is cheap and loose (about 1.2-1.3x the sized rate); where it does not skip,
    `rate_bound` (about 1.01-1.03x; the prefill's attention, the token operators' memory-bound
    part and a mixed batch's host time) decides. On the decision-cost benchmark's workload it
    skips the 4 predictions of about a quarter of the plans. ``whole``: the device's SM count as
    a 1-tuple, the same object every call."""

    def __init__(self, lat: LatencyModel, whole: tuple[int], dec: Batch,
                 chunks: tuple[PrefillChunk, ...], completes: tuple[bool, ...], bound_s: float,
                 factor: float, t_all_floor: float) -> None:
        self.args = (lat, dec, chunks, completes, bound_s, factor)
        self.t_all_floor = t_all_floor
        self.floor = float(lat.token_seconds_floor(whole)[0]) * factor
        self.n = sum(c.length for c in chunks)

    def get(self, beat: float, alone: Breakdown | None = None) -> Sized | None:
        """The sized batch, or None when none fits or it cannot prefill faster than ``beat``
        tokens per second (0: always size). ``alone``: ``lat.predict(dec)`` when the caller has
        it already (uncorrected), so it is not predicted twice."""
        lat, dec, chunks, completes, bound_s, factor = self.args
        bd = lat.predict(dec) if alone is None else alone
        t_none = bd.total_s * factor
        if t_none >= bound_s:
            return None
        if beat > 0.0 and self.floor > 0.0:
            fixed = (bd.attention_s + bd.host_s) * factor + len(dec) * self.floor
            p_max = min(self.n, (bound_s - fixed) / self.floor)
            if p_max <= 0.0 or p_max / (fixed + p_max * self.floor) <= beat:
                return None
            near = int(p_max)
            if rate_bound(lat, bd, len(dec), chunks, self.n, bound_s, factor, near) <= beat:
                return None
        return size_aggregated(lat, dec, chunks, completes, bound_s, factor, t_none,
                               self.t_all_floor)
