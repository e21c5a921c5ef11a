"""What one LatencyModel derives from one batch once, so each SM count costs O(1) arithmetic.

Attention of the rows of one kernel takes ``sum_i max(A_i * x, M_i * y)`` seconds, with A_i the
keys row i attends, ``M_i = bytes_per_q * q_i + bytes_per_kv * kv_i`` its HBM bytes, and x, y the
seconds per attended key and per byte at an SM count (efficiencies folded in). Row i is
compute-bound when its ratio ``A_i / M_i`` exceeds ``t = y / x``. So with the rows sorted by that
ratio, the sum is ``x * (A of the compute-bound rows) + y * (M of the others)``, and both parts
are exact integer sums. In practice every row is on the same side at every SM count (decode rows
are memory-bound by ~60x on Hopper), which costs one comparison against the extreme ratios; the
sorted split is built only when some threshold falls between them.

The scalar (`seconds`) and vectorised (`seconds_many`) evaluations perform the same
floating-point operations on the same values, so they agree bit for bit.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

import numpy as np

from .batch import NO_ROWS, Batch, KernelRows

_SPLIT_PY = 48  # rows up to which the sorted split is built in plain Python


class AttnRows:
    """Attention of one kernel's rows for one model (see the module docstring)."""

    __slots__ = ("n", "a_all", "m_all", "r_lo", "r_hi", "_q_rows", "_c_rows", "_bpq", "_bpkv",
                 "_split",
                 "_per_row")

    def __init__(self, rows: KernelRows, bpq: float, bpkv: float, decode: bool) -> None:
        self.n = rows.n
        # the row arrays, not `rows` itself: rows.memo holds this object (no reference cycle,
        # so a batch's derivations are freed by reference counting, without the cyclic GC)
        self._q_rows, self._c_rows = rows.q_rows, rows.c_rows
        self._bpq, self._bpkv = bpq, bpkv
        self._split: _Split | None = None
        self._per_row: tuple[list[int], list[int], list[int], list[float]] | None = None
        self.a_all = float(rows.attended)
        self.m_all = bpq * float(rows.q) + bpkv * float(rows.kv)
        if not rows.n:
            self.r_lo = self.r_hi = 0.0
        elif decode or rows.n > _SPLIT_PY:
            if decode:  # A = kv = c + 1 and q = 1: the ratio grows with c
                lo, hi = float(rows.c_min + 1), float(rows.c_max + 1)
                self.r_lo = lo / (bpq * 1.0 + bpkv * lo)
                self.r_hi = hi / (bpq * 1.0 + bpkv * hi)
            else:
                ratios = self.split().ratios
                self.r_lo, self.r_hi = ratios[0], ratios[-1]
        else:  # few rows (prefill chunks): per-row values in Python, kept for the split
            qs, cs = _ints(rows.q_rows), _ints(rows.c_rows)
            att, kv, ratio = [], [], []
            for qi, ci in zip(qs, cs, strict=True):
                a, k = qi * ci + qi * (qi + 1) // 2, ci + qi
                att.append(a)
                kv.append(k)
                # int / float converts the int first: as float(a) / ... in _split_np
                ratio.append(a / (bpq * qi + bpkv * k))
            self._per_row = (qs, att, kv, ratio)
            self.r_lo, self.r_hi = min(ratio), max(ratio)

    @classmethod
    def of(cls, rows: KernelRows, key: object, bpq: float, bpkv: float, decode: bool
           ) -> AttnRows:
        """Cached per (rows, model): a concatenated batch reuses its parts' kernels."""
        if not rows.n:
            return _NO_ATTN
        hit = rows.memo.get(key)
        if hit is None:
            hit = rows.memo[key] = cls(rows, bpq, bpkv, decode)
        return hit

    def split(self) -> _Split:
        if self._split is None:
            if self._per_row is not None:
                self._split = _split_py(*self._per_row, self._bpq, self._bpkv)
            else:
                self._split = _split_np(self._q_rows, self._c_rows, self._bpq, self._bpkv)
        return self._split

    def _count(self, t: float) -> int:
        """Rows with ratio > t (compute-bound at threshold t)."""
        if t >= self.r_hi:
            return 0
        if t < self.r_lo:
            return self.n
        return self.n - bisect_right(self.split().ratios, t)

    def seconds(self, x: float, y: float, t: float) -> float:
        if not self.n:
            return 0.0
        if t >= self.r_hi:
            return y * self.m_all
        if t < self.r_lo:
            return x * self.a_all
        sp = self.split()
        k = self._count(t)
        return x * sp.ac[k] + y * sp.mm[k]

    def seconds_many(self, x: np.ndarray, y: np.ndarray, t: np.ndarray, t_lo: float,
                     t_hi: float) -> np.ndarray | float:
        """`seconds` at every (x, y, t); t_lo/t_hi: min/max of t. 0.0 when there are no rows."""
        if not self.n:
            return 0.0
        if t_lo >= self.r_hi:
            return y * self.m_all
        if t_hi < self.r_lo:
            return x * self.a_all
        ratios, ac, mm = self.split().arrays()
        k = self.n - np.searchsorted(ratios, t, side="right")
        k = np.where(t >= self.r_hi, 0, np.where(t < self.r_lo, self.n, k))
        # k == 0: x * 0.0 + y * m_all == y * m_all; k == n: x * a_all + 0.0 == x * a_all
        return x * ac[k] + y * mm[k]


class _Split:
    """Rows sorted by ratio (ascending); for k = 0..n compute-bound rows (the k largest ratios):
    ``ac[k]``, A of those rows, and ``mm[k]``, M of the others. Lists, and arrays on demand."""

    __slots__ = ("ratios", "ac", "mm", "_arrays")

    def __init__(self, ratios: list[float], ac: list[float], mm: list[float]) -> None:
        self.ratios, self.ac, self.mm = ratios, ac, mm
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._arrays is None:
            self._arrays = (np.array(self.ratios), np.array(self.ac), np.array(self.mm))
        return self._arrays


def _split_py(qs: list[int], att: list[int], kv: list[int], ratio: list[float], bpq: float,
              bpkv: float) -> _Split:
    """Exact Python-int partial sums, each converted once and combined like
    ``AttnRows.m_all``; the same values as `_split_np`."""
    order = sorted(range(len(qs)), key=ratio.__getitem__)  # stable, like argsort(stable)
    a_top, cq, ckv = [0], [0], [0]
    for i in reversed(order):
        a_top.append(a_top[-1] + att[i])
    for i in order:
        cq.append(cq[-1] + qs[i])
        ckv.append(ckv[-1] + kv[i])
    n = len(qs)
    ac = [float(a) for a in a_top]
    mm = [bpq * float(cq[n - k]) + bpkv * float(ckv[n - k]) for k in range(n + 1)]
    return _Split([ratio[i] for i in order], ac, mm)


def _split_np(q_rows: Sequence[int] | np.ndarray, c_rows: Sequence[int] | np.ndarray, bpq: float,
              bpkv: float) -> _Split:
    q = np.asarray(q_rows, np.int64)
    c = np.asarray(c_rows, np.int64)
    att = q * c + q * (q + 1) // 2
    kv = c + q
    ratio = att.astype(np.float64) / (bpq * q.astype(np.float64) + bpkv * kv.astype(np.float64))
    order = np.argsort(ratio, kind="stable")
    ratio, att, q, kv = ratio[order], att[order], q[order], kv[order]
    zero = np.zeros(1, np.int64)
    a_top = np.concatenate([zero, np.cumsum(att[::-1])])  # A of the k largest ratios
    q_low = np.concatenate([zero, np.cumsum(q)])[::-1]  # q and kv of the n - k others
    kv_low = np.concatenate([zero, np.cumsum(kv)])[::-1]
    ac = a_top.astype(np.float64)
    mm = bpq * q_low.astype(np.float64) + bpkv * kv_low.astype(np.float64)
    sp = _Split(ratio.tolist(), ac.tolist(), mm.tolist())
    sp._arrays = (ratio, ac, mm)
    return sp


_NO_ATTN = AttnRows(NO_ROWS, 1.0, 1.0, True)  # no rows: 0 seconds for every model


def _ints(seq) -> list[int]:
    return seq if type(seq) is list else np.asarray(seq).tolist()


class Prepared:
    """Per (model, batch): token and row counts, attention rows, FLOPs, bytes, link time."""

    __slots__ = ("tokens", "rows", "dec", "pre", "flops", "nbytes", "comm", "gather")

    def __init__(self, lm, dec_rows: KernelRows, pre_rows: KernelRows, rows: int) -> None:
        # lm: LatencyModel (import cycle); rows: LM-head rows (sampling requests)
        a, m, c = lm.att, lm.model, lm.op_sums
        bpq, bpkv = a.bytes_per_q, a.bytes_per_kv
        self.tokens = tokens = dec_rows.q + pre_rows.q
        self.rows = rows
        key = lm.memo_key
        self.dec = AttnRows.of(dec_rows, key, bpq, bpkv, True)
        self.pre = AttnRows.of(pre_rows, key, bpq, bpkv, False)
        L = m.num_layers
        attended = float(dec_rows.attended + pre_rows.attended)
        kv = float(dec_rows.kv + pre_rows.kv)
        self.flops = L * (c.tok_f * tokens + a.flops_per_attended * attended)
        self.nbytes = L * (c.tok_b * tokens + c.tok_w + bpq * tokens + bpkv * kv)
        if rows:
            self.flops += c.head_f * rows
            self.nbytes += c.head_b * rows + c.head_w
        self.comm, self.gather = lm.link_seconds(tokens, rows) if m.tp > 1 else (0.0, 0.0)

    @classmethod
    def of(cls, lm, b: Batch) -> Prepared:
        """Cached in the batch's memo, per model."""
        p = b.memo.get(lm.memo_key)
        if p is None:
            dec_rows, pre_rows = b.kernels
            p = b.memo[lm.memo_key] = cls(lm, dec_rows, pre_rows, b.n_sample)
        return p

    @classmethod
    def union(cls, lm, a: Batch, b: Batch) -> Prepared:
        """What `of(lm, a.concat(b))` computes (exact integer sums), without the arrays."""
        (d1, p1), (d2, p2) = a.kernels, b.kernels
        return cls(lm, d1.merged(d2), p1.merged(p2), a.n_sample + b.n_sample)
