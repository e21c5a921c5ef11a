"""The fast path: `reference.py`'s arithmetic rearranged for the planner's 100 us budget.

Everything in this module exists only because `DuetPolicy.plan()` scores a whole SM menu
(~65 partition pairs) every iteration within about 100 us (`benchmark/policy/decision_cost.py`),
and the simulator predicts millions of iterations. Nothing here changes a prediction: the
property tests (`test/latency/test_fast.py`) hold `predict` to `reference.predict` and
`predict_many` / `predict_concurrent_table` to `predict` bit for bit. The tricks:

* `Rates`: per SM count, every operator's seconds per token with the efficiencies folded in, so
  a token-level operator costs ``max(kf * T, kb * T + kw)``; memoised per (tokens, rows), which
  repeat from one iteration to the next.
* `Prepared`: what one model derives from one batch once (kept in `Batch.memo`).
* `AttnRows`: attention of one kernel's rows, ``sum_i max(A_i * x, M_i * y)`` (A_i keys row i
  attends, ``M_i = bytes_per_q * q_i + bytes_per_kv * kv_i`` its bytes, x and y seconds per key
  and per byte). Row i is compute-bound when ``A_i / M_i > t = y / x``; with the rows sorted by
  that ratio the sum is ``x * (A of compute-bound rows) + y * (M of the others)``, exact integer
  sums. Usually every row is on one side (decode rows are memory-bound ~60x on Hopper), which
  one comparison against the extreme ratios detects; the sorted split is built only otherwise.
* `SmTable`: the rates of a tuple of SM counts as (operators x SM counts) arrays; the vectorised
  evaluation repeats the scalar one's floating-point operations elementwise, in the same order.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from .batch import NO_ROWS, Batch, KernelRows
from .breakdown import Breakdown, Breakdowns

MEMO_KEEP = 256  # (tokens, rows) entries kept per SM count / table
_SPLIT_PY = 48  # rows up to which the sorted split is built in plain Python


@dataclass(frozen=True, slots=True)
class Rates:
    """Seconds per unit of work at one SM count (efficiencies folded in).

    token/head: per operator (s per token on compute, s per token on memory, fixed s on memory
    (weights)). x_*: s per attended key; y_*: s per HBM byte; t_* = y / x (decode / prefill
    attention kernel)."""

    token: tuple[tuple[float, float, float], ...]
    head: tuple[tuple[float, float, float], ...]
    x_dec: float
    y_dec: float
    t_dec: float
    x_pre: float
    y_pre: float
    t_pre: float
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def build(cls, lm, sms: int) -> Rates:
        cal = lm.calibration
        compute, bw = lm.hardware.compute(sms), lm.hardware.bandwidth(sms)

        def per_op(ops):
            out = []
            for op in ops:
                ec, eb = cal.efficiency(op.cls)
                out.append((op.f / (compute * ec), op.b / (bw * eb), op.w / (bw * eb)))
            return tuple(out)

        fa = lm.att.flops_per_attended
        dc, db = cal.efficiency("attn_decode")
        pc, pb = cal.efficiency("attn_prefill")
        x_dec, y_dec = fa / (compute * dc), 1.0 / (bw * db)
        x_pre, y_pre = fa / (compute * pc), 1.0 / (bw * pb)
        return cls(per_op(lm.token_ops), per_op(lm.head_ops), x_dec, y_dec, y_dec / x_dec,
                   x_pre, y_pre, y_pre / x_pre)

    def ops_seconds(self, tokens: int, rows: int) -> tuple[float, float]:
        """(token-op seconds of one layer, LM-head seconds) for these counts, memoised."""
        key = (tokens, rows)
        hit = self.memo.get(key)
        if hit is None:
            tok = 0.0
            for kf, kb, kw in self.token:
                x, y = kf * tokens, kb * tokens + kw
                tok += x if x > y else y
            head = 0.0
            for kf, kb, kw in (self.head if rows else ()):
                x, y = kf * rows, kb * rows + kw
                head += x if x > y else y
            if len(self.memo) >= MEMO_KEEP:
                self.memo.clear()
            hit = self.memo[key] = (tok, head)
        return hit


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
    def of(cls, q_rows, c_rows, bpq: float, bpkv: float) -> _Split:
        if len(q_rows) <= _SPLIT_PY:
            return cls._of_py(_ints(q_rows), _ints(c_rows), bpq, bpkv)
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
    def _of_py(cls, qs: list[int], cs: list[int], bpq: float, bpkv: float) -> _Split:
        """The same values as the numpy build (exact int sums, each converted once); faster
        for a few rows (prefill chunks)."""
        att = [qi * ci + qi * (qi + 1) // 2 for qi, ci in zip(qs, cs, strict=True)]
        kv = [ci + qi for qi, ci in zip(qs, cs, strict=True)]
        ratio = [a / (bpq * float(qi) + bpkv * float(k)) for a, qi, k in zip(att, qs, kv,
                                                                               strict=True)]
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

    __slots__ = ("n", "a_all", "m_all", "r_lo", "r_hi", "_rows", "_bpq", "_bpkv", "_split")

    def __init__(self, rows: KernelRows, bpq: float, bpkv: float, decode: bool) -> None:
        self.n = rows.n
        # the row arrays, not `rows` itself: rows.memo holds this object (no reference cycle)
        self._rows = (rows.q_rows, rows.c_rows)
        self._bpq, self._bpkv = bpq, bpkv
        self._split: _Split | None = None
        self.a_all = float(rows.attended)
        self.m_all = bpq * float(rows.q) + bpkv * float(rows.kv)
        self.r_lo = self.r_hi = 0.0
        if decode and rows.n:  # A = kv = c + 1 and q = 1: the ratio grows with c
            lo, hi = float(rows.c_min + 1), float(rows.c_max + 1)
            self.r_lo = lo / (bpq * 1.0 + bpkv * lo)
            self.r_hi = hi / (bpq * 1.0 + bpkv * hi)
        elif rows.n > _SPLIT_PY:
            ratios = self.split().ratios
            self.r_lo, self.r_hi = ratios[0], ratios[-1]
        elif rows.n:  # few rows (prefill chunks): extreme ratios in Python
            ratio = [(qi * ci + qi * (qi + 1) // 2) / (bpq * qi + bpkv * (ci + qi))
                     for qi, ci in zip(_ints(rows.q_rows), _ints(rows.c_rows), strict=True)]
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
            self._split = _Split.of(*self._rows, self._bpq, self._bpkv)
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


class Prepared:
    """Per (model, batch): token and row counts, attention rows, FLOPs, bytes and link seconds
    (from `reference.link_seconds`, the one place they are written)."""

    __slots__ = ("tokens", "rows", "dec", "pre", "flops", "nbytes", "comm", "gather")

    def __init__(self, lm, dec_rows: KernelRows, pre_rows: KernelRows, rows: int) -> None:
        a, c = lm.att, lm.op_sums
        bpq, bpkv = a.bytes_per_q, a.bytes_per_kv
        self.tokens = tokens = dec_rows.q + pre_rows.q
        self.rows = rows
        self.dec = AttnRows.of(dec_rows, lm.memo_key, bpq, bpkv, True)
        self.pre = AttnRows.of(pre_rows, lm.memo_key, bpq, bpkv, False)
        L = lm.model.num_layers
        attended = float(dec_rows.attended + pre_rows.attended)
        kv = float(dec_rows.kv + pre_rows.kv)
        self.flops = L * (c.tok_f * tokens + a.flops_per_attended * attended)
        self.nbytes = L * (c.tok_b * tokens + c.tok_w + bpq * tokens + bpkv * kv)
        if rows:
            self.flops += c.head_f * rows
            self.nbytes += c.head_b * rows + c.head_w
        self.comm, self.gather = lm.link_seconds(tokens, rows) if lm.model.tp > 1 else (0.0, 0.0)

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

    def predict(self, r: Rates, layers: int, host: float) -> Breakdown:
        """The Breakdown at one SM count's rates, with `host` seconds of host overhead."""
        tok, head = r.ops_seconds(self.tokens, self.rows)
        if self.rows:
            head += self.gather
        att = (self.dec.seconds(r.x_dec, r.y_dec, r.t_dec)
               + self.pre.seconds(r.x_pre, r.y_pre, r.t_pre))
        comm = self.comm
        return Breakdown(layers * (tok + att + comm) + head + host, layers * tok, layers * att,
                         layers * comm, head, self.flops, self.nbytes, host)


class SmTable:
    """`Rates` of a tuple of SM counts as arrays; built once per tuple and cached by the model."""

    def __init__(self, rates: list[Rates], sms: tuple[int, ...]) -> None:
        if not rates:
            raise ValueError("need at least one SM count")
        self.sms = sms

        def grid(pick):  # [op][sm] -> (n_ops, n_sms) arrays of (compute, memory, fixed) rates
            cols = [pick(r) for r in rates]
            return tuple(np.array([[col[o][j] for col in cols] for o in range(len(cols[0]))],
                                  dtype=np.float64) for j in range(3))

        self.kf, self.kb, self.kw = grid(lambda r: r.token)
        self.hf, self.hb, self.hw = grid(lambda r: r.head)
        arr = np.array([[r.x_dec, r.y_dec, r.t_dec, r.x_pre, r.y_pre, r.t_pre] for r in rates],
                       dtype=np.float64).T.copy()
        self.x_dec, self.y_dec, self.t_dec, self.x_pre, self.y_pre, self.t_pre = arr
        self.t_dec_lo, self.t_dec_hi = float(self.t_dec.min()), float(self.t_dec.max())
        self.t_pre_lo, self.t_pre_hi = float(self.t_pre.min()), float(self.t_pre.max())
        self.pair_checked: SmTable | None = None  # partner table already validated against
        self.ops_memo: dict[tuple[int, int, float], tuple[np.ndarray, np.ndarray | float]] = {}
        self.floor = self.kf.sum(axis=0)  # compute seconds per token of one layer's token ops

    def _parts(self, p: Prepared) -> tuple[np.ndarray, np.ndarray | float, np.ndarray | float]:
        """(token-op seconds per layer, attention seconds per layer, LM head incl. gather)."""
        key = (p.tokens, p.rows, p.gather)
        ops = self.ops_memo.get(key)
        if ops is None:
            tok = _op_seconds(self.kf, self.kb, self.kw, p.tokens)
            head: np.ndarray | float = 0.0
            if p.rows:
                head = _op_seconds(self.hf, self.hb, self.hw, p.rows) + p.gather
            if len(self.ops_memo) >= MEMO_KEEP:
                self.ops_memo.clear()
            ops = self.ops_memo[key] = (tok, head)
        # adding an empty kernel's 0.0 (as the scalar path does) changes no value
        att: np.ndarray | float = 0.0
        if p.dec.n:
            att = p.dec.seconds_many(self.x_dec, self.y_dec, self.t_dec, self.t_dec_lo,
                                     self.t_dec_hi)
        if p.pre.n:
            att = att + p.pre.seconds_many(self.x_pre, self.y_pre, self.t_pre, self.t_pre_lo,
                                           self.t_pre_hi)
        return ops[0], att, ops[1]

    def totals(self, p: Prepared, layers: int, host: float) -> np.ndarray:
        """`Prepared.predict(...).total_s` at every SM count of the table (batch not empty)."""
        tok, att, head = self._parts(p)
        s = tok + att
        if p.comm:  # x + 0.0 == x: skipping zero terms changes no value
            s = s + p.comm
        s = layers * s
        if p.rows:
            s += head
        if host:
            s += host
        return s

    def predict(self, p: Prepared, layers: int, host: float) -> Breakdowns:
        tok, att, head = self._parts(p)
        n = len(self.sms)
        total = layers * (tok + att + p.comm) + head + host
        full = np.broadcast_to  # scalar parts (no rows of that kind) as arrays
        return Breakdowns(total, layers * tok, full(layers * att, (n,)).copy(),
                          np.full(n, layers * p.comm),
                          full(np.asarray(head, np.float64), (n,)).copy(), p.flops, p.nbytes,
                          host)


def row_sum(m: np.ndarray) -> np.ndarray:
    """Sum over rows, accumulated row by row from the first (as the scalar loop does)."""
    if m.shape[1] > 1:
        return np.add.reduce(m, axis=0)  # outer-axis reduction: sequential over rows
    acc = m[0].copy()
    for row in m[1:]:
        acc += row
    return acc


def _op_seconds(kf: np.ndarray, kb: np.ndarray, kw: np.ndarray, count: int) -> np.ndarray:
    """sum over operators of max(kf * count, kb * count + kw), per SM count."""
    x = kf * count
    y = kb * count
    y += kw
    np.maximum(x, y, out=x)
    return row_sum(x)


def check_pairs(hw, tab_d: SmTable, tab_p: SmTable) -> None:
    """ValueError unless every (decode, prefill) pair fits the device; remembered per pair."""
    if tab_d.pair_checked is tab_p:
        return
    if len(tab_d.sms) != len(tab_p.sms):
        raise ValueError("sms_decode and sms_prefill differ in length")
    for sd, sp in zip(tab_d.sms, tab_p.sms, strict=True):
        check_pair(hw, sd, sp)
    tab_d.pair_checked = tab_p


def check_pair(hw, sms_decode: int, sms_prefill: int) -> None:
    if hw.usable_sms(sms_decode) + hw.usable_sms(sms_prefill) > hw.num_sms:
        raise ValueError(
            f"partitions {sms_decode} + {sms_prefill} SMs exceed {hw.num_sms} on {hw.name}")

