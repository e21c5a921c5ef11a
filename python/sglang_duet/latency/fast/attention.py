"""Attention of one kernel's rows, ``sum_i max(A_i * x, M_i * y)``, without a loop over rows.

A_i: keys row i attends; ``M_i = bytes_per_q * q_i + bytes_per_kv * kv_i``: its bytes; x and y:
seconds per key and per byte. Row i is compute-bound when ``A_i / M_i > t = y / x``; with the
rows sorted by that ratio the sum is ``x * (A of compute-bound rows) + y * (M of the others)``,
exact integer sums. Usually every row is on one side (decode rows are memory-bound ~60x on
Hopper), which one comparison against the extreme ratios detects; the sorted split is built only
otherwise.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from .rows import NO_ROWS, KernelRows

SPLIT_PY = 48  # rows up to which the sorted split is built in plain Python


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

    @classmethod
    def of_arrays(cls, q_rows, c_rows, bpq: float, bpkv: float) -> _Split:
        q = np.asarray(q_rows, np.int64)
        c = np.asarray(c_rows, np.int64)
        att = q * c + q * (q + 1) // 2
        kv = c + q
        ratio = att.astype(np.float64) / (bpq * q.astype(np.float64)
                                          + bpkv * kv.astype(np.float64))
        order = np.argsort(ratio, kind="stable")
        ratio, att, q, kv = ratio[order], att[order], q[order], kv[order]
        zero = np.zeros(1, np.int64)
        a_top = np.concatenate([zero, np.cumsum(att[::-1])])  # A of the k largest ratios
        q_low = np.concatenate([zero, np.cumsum(q)])[::-1]  # q and kv of the n - k others
        kv_low = np.concatenate([zero, np.cumsum(kv)])[::-1]
        ac = a_top.astype(np.float64)
        mm = bpq * q_low.astype(np.float64) + bpkv * kv_low.astype(np.float64)
        sp = cls(ratio.tolist(), ac.tolist(), mm.tolist())
        sp._arrays = (ratio, ac, mm)
        return sp

    @classmethod
    def of_lists(cls, qs: list[int], att: list[int], kv: list[int], ratio: list[float],
                 bpq: float, bpkv: float) -> _Split:
        """The same values as `of_arrays` (exact int sums, each converted once) from the rows'
        per-row lists; faster for a few rows (prefill chunks)."""
        order = sorted(range(len(qs)), key=ratio.__getitem__)  # stable, like argsort(stable)
        a_top, cq, ckv = [0], [0], [0]
        for i in reversed(order):
            a_top.append(a_top[-1] + att[i])
        for i in order:
            cq.append(cq[-1] + qs[i])
            ckv.append(ckv[-1] + kv[i])
        n = len(qs)
        mm = [bpq * float(cq[n - k]) + bpkv * float(ckv[n - k]) for k in range(n + 1)]
        return cls([ratio[i] for i in order], [float(a) for a in a_top], mm)


class AttnRows:
    """Attention of one kernel's rows for one model (see the module docstring)."""

    __slots__ = ("n", "a_all", "m_all", "r_lo", "r_hi", "_rows", "_lists", "_bpq", "_bpkv",
                 "_split")

    def __init__(self, rows: KernelRows, bpq: float, bpkv: float, decode: bool) -> None:
        self.n = rows.n
        # the row arrays, not `rows` itself: rows.memo holds this object (no reference cycle)
        self._rows = (rows.q_rows, rows.c_rows)
        self._bpq, self._bpkv = bpq, bpkv
        self._split: _Split | None = None
        self._lists: tuple[list[int], list[int], list[int], list[float]] | None = None
        self.a_all = float(rows.attended)
        self.m_all = bpq * float(rows.q) + bpkv * float(rows.kv)
        self.r_lo = self.r_hi = 0.0
        if decode and rows.n:  # A = kv = c + 1 and q = 1: the ratio grows with c
            lo, hi = float(rows.c_min + 1), float(rows.c_max + 1)
            self.r_lo = lo / (bpq * 1.0 + bpkv * lo)
            self.r_hi = hi / (bpq * 1.0 + bpkv * hi)
        elif rows.n > SPLIT_PY:
            ratios = self.split().ratios
            self.r_lo, self.r_hi = ratios[0], ratios[-1]
        elif rows.n:  # few rows (prefill chunks): per-row values in Python, kept for the split
            qs, cs = _ints(rows.q_rows), _ints(rows.c_rows)
            att: list[int] = []
            kv: list[int] = []
            ratio: list[float] = []
            for qi, ci in zip(qs, cs, strict=True):  # one loop: cheaper than three for 1-2 rows
                a, k = qi * ci + qi * (qi + 1) // 2, ci + qi
                att.append(a)
                kv.append(k)
                ratio.append(a / (bpq * qi + bpkv * k))  # ints convert first, as in of_arrays
            self.r_lo, self.r_hi = min(ratio), max(ratio)
            self._lists = (qs, att, kv, ratio)

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
            if self._lists is not None:
                self._split = _Split.of_lists(*self._lists, self._bpq, self._bpkv)
            else:
                self._split = _Split.of_arrays(*self._rows, self._bpq, self._bpkv)
        return self._split

    def seconds(self, x: float, y: float, t: float) -> float:
        if not self.n:
            return 0.0
        if t >= self.r_hi:
            return y * self.m_all
        if t < self.r_lo:
            return x * self.a_all
        sp = self.split()
        k = self.n - bisect_right(sp.ratios, t)
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


_NO_ATTN = AttnRows(NO_ROWS, 1.0, 1.0, True)


def _ints(seq) -> list[int]:
    return seq if type(seq) is list else np.asarray(seq).tolist()
