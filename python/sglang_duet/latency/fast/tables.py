"""Per-SM-count rates and per-batch preparation: the scalar and menu-wide evaluations."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..breakdown import Breakdown
from .attention import AttnRows
from .rows import KernelRows

if TYPE_CHECKING:
    from ..batch import Batch

MEMO_KEEP = 256  # (tokens, rows) entries kept per SM count / table


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



@dataclass(frozen=True, slots=True)
class OpSums:
    """FLOP and byte coefficients summed over one layer's token operators and the LM head."""

    tok_f: float
    tok_b: float
    tok_w: float
    head_f: float
    head_b: float
    head_w: float

    @classmethod
    def of(cls, token_ops, head_ops) -> OpSums:
        return cls(*(sum(getattr(op, k) for op in ops) for ops in (token_ops, head_ops)
                     for k in ("f", "b", "w")))


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
        return cls.union_rows(lm, a, b.kernels, b.n_sample)

    @classmethod
    def union_rows(cls, lm, a: Batch, kernels: tuple[KernelRows, KernelRows], n_sample: int
                   ) -> Prepared:
        """`union` with a second batch given by its (decode, prefill) rows and sampling rows."""
        (d1, p1), (d2, p2) = a.kernels, kernels
        return cls(lm, d1.merged(d2), p1.merged(p2), a.n_sample + n_sample)

    def total_with_row(self, lm, r: Rates, q: int, c: int, n_sample: int, host: float
                       ) -> float:
        """``union_rows(lm, a, rows_py([q], [c]), n_sample).total(r, L, host')`` for this
        decode-only batch ``a`` and one prefill row (q >= 2 new tokens after c cached), bit for
        bit (the same operations in the same order), without building that row's KernelRows,
        AttnRows and Prepared: the SLO-sized search's probe. ``host``: the mixed batch's host
        seconds (`LatencyModel._host_of`'s)."""
        a = lm.att
        bpq, bpkv = a.bytes_per_q, a.bytes_per_kv
        tokens, rows = self.tokens + q, self.rows + n_sample
        attended, kv = q * c + q * (q + 1) // 2, c + q
        # the row's attention: one row is on one side of t (AttnRows with r_lo == r_hi)
        if r.t_pre >= attended / (bpq * q + bpkv * kv):
            pre = r.y_pre * (bpq * float(q) + bpkv * float(kv))
        else:
            pre = r.x_pre * float(attended)
        tok, head = r.ops_seconds(tokens, rows)
        comm = 0.0
        if lm.model.tp > 1:
            comm, gather = lm.link_seconds(tokens, rows)
            if rows:
                head += gather
        att = self.dec.seconds(r.x_dec, r.y_dec, r.t_dec) + pre
        return _total(lm.model.num_layers, tok, att, comm, head, host)

    def _terms(self, r: Rates) -> tuple[float, float, float]:
        """(token-op, attention seconds of one layer, LM head incl. gather) at rates `r`."""
        tok, head = r.ops_seconds(self.tokens, self.rows)
        if self.rows:
            head += self.gather
        att = (self.dec.seconds(r.x_dec, r.y_dec, r.t_dec)
               + self.pre.seconds(r.x_pre, r.y_pre, r.t_pre))
        return tok, att, head

    def predict(self, r: Rates, layers: int, host: float) -> Breakdown:
        """The Breakdown at one SM count's rates, with `host` seconds of host overhead."""
        tok, att, head = self._terms(r)
        comm = self.comm
        return Breakdown(_total(layers, tok, att, comm, head, host), layers * tok, layers * att,
                         layers * comm, head, self.flops, self.nbytes, host)

    def total(self, r: Rates, layers: int, host: float) -> float:
        """``predict(r, layers, host).total_s``, without building the Breakdown."""
        tok, att, head = self._terms(r)
        return _total(layers, tok, att, self.comm, head, host)


def _total(layers: int, tok: float, att: float, comm: float, head: float, host: float) -> float:
    """An iteration's seconds from one layer's token-op, attention and link seconds, the LM
    head's and the host's (`SmTable.totals` computes the same per SM count)."""
    return layers * (tok + att + comm) + head + host


class SmTable:
    """`Rates` of a tuple of SM counts as arrays; built once per tuple and cached by the model."""

    def __init__(self, rates: list[Rates], sms: tuple[int, ...]) -> None:
        if not rates:
            raise ValueError("need at least one SM count")
        self.sms = sms
        self.rates = rates  # per SM count, for the entry-by-entry path of short menus

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

