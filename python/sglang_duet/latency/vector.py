"""One batch at many SM counts in one numpy pass (the partition optimizer scores a whole menu).

`SmTable` holds, for a tuple of SM counts, the same per-SM rates `LatencyModel.predict` uses,
as arrays (operators x SM counts). `totals_table` / `predict_table` then repeat `predict`'s
floating-point operations elementwise, so every entry equals the scalar prediction bit for bit
(sums over operators are accumulated in the same order: row by row).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .breakdown import Breakdown

if TYPE_CHECKING:
    from .predictor import LatencyModel, _Rates
    from .prepared import Prepared


class SmTable:
    """Rates of a tuple of SM counts, as arrays; built once per tuple and cached by the model."""

    def __init__(self, rates: list[_Rates], sms: tuple[int, ...]) -> None:
        self.sms = sms
        if not rates:
            raise ValueError("need at least one SM count")

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
        # (tokens, rows) -> (token-op seconds, LM-head seconds incl. gather): they depend on
        # the counts only, which repeat from one iteration to the next (same decode count)
        self.ops_memo: dict[tuple[int, int, float], tuple[np.ndarray, np.ndarray | float]] = {}
        self._floor: np.ndarray | None = None

    def token_floor(self, layers: int) -> np.ndarray:
        """layers * sum over token operators of the compute seconds per token (a lower bound
        of any prediction's seconds per token at each SM count)."""
        if self._floor is None:
            self._floor = layers * self.kf.sum(axis=0)
        return self._floor


def _row_sum(m: np.ndarray) -> np.ndarray:
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
    return _row_sum(x)


_MEMO_KEEP = 256


def _parts(p: Prepared, tab: SmTable
           ) -> tuple[np.ndarray, np.ndarray | float, np.ndarray | float]:
    key = (p.tokens, p.rows, p.gather)
    ops = tab.ops_memo.get(key)
    if ops is None:
        tok = _op_seconds(tab.kf, tab.kb, tab.kw, p.tokens)
        head: np.ndarray | float = 0.0
        if p.rows:
            head = _op_seconds(tab.hf, tab.hb, tab.hw, p.rows) + p.gather
        if len(tab.ops_memo) >= _MEMO_KEEP:
            tab.ops_memo.clear()
        ops = tab.ops_memo[key] = (tok, head)
    # NOTE: adding an empty kernel's 0.0 (as the scalar path does) changes no value
    if not p.pre.n:
        att = p.dec.seconds_many(tab.x_dec, tab.y_dec, tab.t_dec, tab.t_dec_lo, tab.t_dec_hi)
    elif not p.dec.n:
        att = p.pre.seconds_many(tab.x_pre, tab.y_pre, tab.t_pre, tab.t_pre_lo, tab.t_pre_hi)
    else:
        att = (p.dec.seconds_many(tab.x_dec, tab.y_dec, tab.t_dec, tab.t_dec_lo, tab.t_dec_hi)
               + p.pre.seconds_many(tab.x_pre, tab.y_pre, tab.t_pre, tab.t_pre_lo, tab.t_pre_hi))
    return ops[0], att, ops[1]


def totals_table(lm: LatencyModel, p: Prepared, tab: SmTable) -> np.ndarray:
    """`predict(batch, s).total_s` for every s of the table (batch not empty)."""
    tok, att, head = _parts(p, tab)
    s = tok + att
    if p.comm:  # x + 0.0 == x: skipping zero terms changes no value
        s = s + p.comm
    s = lm.model.num_layers * s
    if p.rows:
        s += head
    over = lm.calibration.iteration_overhead_s
    if over:
        s += over
    return s


@dataclass(frozen=True, slots=True)
class Breakdowns:
    """`Breakdown` at many SM counts: time components are arrays (one entry per SM count);
    flops and bytes do not depend on the SM count."""

    total_s: np.ndarray
    token_ops_s: np.ndarray
    attention_s: np.ndarray
    comm_s: np.ndarray
    lm_head_s: np.ndarray
    flops: float
    bytes: float
    overhead_s: float = 0.0

    def __len__(self) -> int:
        return len(self.total_s)

    def at(self, i: int) -> Breakdown:
        return Breakdown(float(self.total_s[i]), float(self.token_ops_s[i]),
                         float(self.attention_s[i]), float(self.comm_s[i]),
                         float(self.lm_head_s[i]), self.flops, self.bytes, self.overhead_s)

    @classmethod
    def zero(cls, n: int) -> Breakdowns:
        z = np.zeros(n)
        return cls(z, z, z, z, z, 0.0, 0.0, 0.0)


def predict_table(lm: LatencyModel, p: Prepared, tab: SmTable) -> Breakdowns:
    tok, att, head = _parts(p, tab)
    n = len(tab.sms)
    L = lm.model.num_layers
    over = lm.calibration.iteration_overhead_s
    total = L * (tok + att + p.comm) + head + over
    full = np.broadcast_to  # scalar parts (no rows of that kind) as arrays
    return Breakdowns(total, L * tok, full(L * att, (n,)).copy(), np.full(n, L * p.comm),
                      full(np.asarray(head, np.float64), (n,)).copy(), p.flops, p.nbytes, over)
