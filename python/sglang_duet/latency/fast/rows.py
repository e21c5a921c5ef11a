"""A batch's attention rows as exact integer sums, built the cheapest way for the batch's size."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

SMALL = 24  # below this many rows, Python integer loops beat numpy's per-call overhead
PY_STATS = 160  # below this many decodes, sum/min/max of a list beat three numpy reductions


class KernelRows:
    """The rows of one attention kernel (decode: q == 1; prefill: q >= 2) as exact integer sums.

    The sums are Python ints, so they do not depend on row order: a batch predicts the same, bit
    for bit, however it was assembled (built from pairs, concatenated, reordered). Treat as
    immutable; `memo` holds per-model derivations (`attention.AttnRows`).
    """

    __slots__ = ("n", "q", "kv", "attended", "q_rows", "c_rows", "c_min", "c_max", "memo")

    def __init__(self, n: int, q: int, kv: int, attended: int,
                 q_rows: Sequence[int] | np.ndarray, c_rows: Sequence[int] | np.ndarray,
                 c_min: int = 0, c_max: int = 0) -> None:
        self.n = n  # rows
        self.q = q  # sum of q
        self.kv = kv  # sum of c + q: keys the kernel reads
        self.attended = attended  # sum of q*c + q*(q+1)/2: keys attended by the new tokens
        self.q_rows = q_rows  # per-row q and c (for the rare mixed-bound split)
        self.c_rows = c_rows
        self.c_min = c_min  # extreme contexts (a decode row's compute/memory ratio grows with c)
        self.c_max = c_max
        self.memo: dict = {}

    def merged(self, other: KernelRows) -> KernelRows:
        if not other.n:
            return self
        if not self.n:
            return other
        cat = [np.concatenate([np.asarray(a, np.int64), np.asarray(b, np.int64)])
               for a, b in ((self.q_rows, other.q_rows), (self.c_rows, other.c_rows))]
        return KernelRows(self.n + other.n, self.q + other.q, self.kv + other.kv,
                          self.attended + other.attended, cat[0], cat[1],
                          min(self.c_min, other.c_min), max(self.c_max, other.c_max))


NO_ROWS = KernelRows(0, 0, 0, 0, (), ())
_ONES: dict[tuple[int, type], np.ndarray] = {}


def ones(n: int, dtype: type) -> np.ndarray:
    """A shared read-only array of n ones (decode batches' q and sample)."""
    arr = _ONES.get((n, dtype))
    if arr is None:
        if len(_ONES) > 256:
            _ONES.clear()
        arr = _ONES[(n, dtype)] = np.ones(n, dtype)
        arr.flags.writeable = False
    return arr


def _decode_rows(c, n: int, sum_c: int, lo: int, hi: int) -> KernelRows:
    """Decode rows (q = 1) with cached contexts `c` (sum, min, max given): attended = keys read =
    c + 1 per row."""
    return KernelRows(n, n, sum_c + n, sum_c + n, ones(n, np.int64), c, lo, hi)


def _decode(c: np.ndarray) -> KernelRows:
    n = int(c.size)
    if not n:
        return NO_ROWS  # the ufuncs' reduce directly: ndarray.sum/min/max add a Python wrapper
    return _decode_rows(c, n, int(np.add.reduce(c)), int(np.minimum.reduce(c)),
                        int(np.maximum.reduce(c)))


def _prefill_py(qs: list[int], cs: list[int]) -> KernelRows:
    if not qs:
        return NO_ROWS
    att = sum([qi * ci + qi * (qi + 1) // 2 for qi, ci in zip(qs, cs, strict=True)])
    sq = sum(qs)
    return KernelRows(len(qs), sq, sum(cs) + sq, att, qs, cs, min(cs), max(cs))


def rows_py(qs: list[int], cs: list[int]) -> tuple[KernelRows, KernelRows]:
    """`kernel_rows` of a few rows, in Python."""
    if len(qs) == 1 and qs[0] > 1:  # one prefill chunk (a sized or shrunk prefix): _prefill_py
        q, c = qs[0], cs[0]
        return NO_ROWS, KernelRows(1, q, c + q, q * c + q * (q + 1) // 2, qs, cs, c, c)
    if qs and 1 not in qs and 0 not in qs:  # prefill chunks only (the usual small batch)
        return NO_ROWS, _prefill_py(qs, cs)
    dc: list[int] = []
    pq: list[int] = []
    pc: list[int] = []
    for qi, ci in zip(qs, cs, strict=True):
        if qi == 1:
            dc.append(ci)
        elif qi > 1:
            pq.append(qi)
            pc.append(ci)
    dec = _decode_rows(dc, len(dc), sum(dc), min(dc), max(dc)) if dc else NO_ROWS
    return dec, _prefill_py(pq, pc)


def kernel_rows(q: np.ndarray, c: np.ndarray) -> tuple[KernelRows, KernelRows]:
    """(decode rows, prefill rows) of a batch; rows with q == 0 run no kernel."""
    if q.size < SMALL:
        return rows_py(q.tolist(), c.tolist())
    is_pre = q > 1
    n_pre = int(np.count_nonzero(is_pre))
    if n_pre == 0:
        return _decode(c if q.min() == 1 else c[q == 1]), NO_ROWS
    dec = _decode(c[q == 1])
    pq, pc = q[is_pre], c[is_pre]
    if n_pre < SMALL:  # a few prefill chunks among many decodes
        return dec, _prefill_py(pq.tolist(), pc.tolist())
    sq = int(pq.sum())
    att = int((pq * pc).sum()) + int((pq * (pq + 1) // 2).sum())
    return dec, KernelRows(int(pq.size), sq, int(pc.sum()) + sq, att, pq, pc, int(pc.min()),
                           int(pc.max()))


def decode_steps(contexts: Sequence[int] | np.ndarray, offset: int) -> tuple[np.ndarray,
                                                                               KernelRows]:
    """(c, decode rows) of one decode step of each request, ``contexts[i] + offset`` cached."""
    if isinstance(contexts, list) and contexts:
        c = np.frombuffer(array("q", contexts), np.int64)  # faster than np.array on ints
    else:
        c = np.asarray(contexts, dtype=np.int64).reshape(-1)
    if offset:
        c = c + offset
    if isinstance(contexts, list) and 0 < len(contexts) < PY_STATS:
        n = len(contexts)  # Python's sum/min/max: the same integers as numpy's, sooner
        return c, _decode_rows(c, n, sum(contexts) + n * offset, min(contexts) + offset,
                               max(contexts) + offset)
    return c, _decode(c)
