"""LatencyModel: roofline time of one forward iteration, attention per request, SM-count aware."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .batch import Batch, BatchLike, as_batch
from .breakdown import ZERO, Breakdown
from .calibration import Calibration
from .contention import combine, combine_totals, progress_rate
from .hardware import HardwareSpec
from .model import ModelSpec
from .ops import (
    allreduce_link_bytes,
    attention_coeffs,
    layer_token_ops,
    lm_head_ops,
    logits_gather_link_bytes,
)
from .prepared import Prepared
from .vector import Breakdowns, SmTable, predict_table, totals_table

_MEMO_KEEP = 256  # (tokens, rows) entries kept per SM count

__all__ = ["ZERO", "Breakdown", "Breakdowns", "ConcurrentTable", "LatencyModel"]


class ConcurrentTable(NamedTuple):
    """`predict_concurrent` totals over a menu of partition pairs (arrays, seconds)."""

    decode_s: np.ndarray  # under contention
    prefill_s: np.ndarray
    decode_alone_s: np.ndarray  # each side alone on its partition
    prefill_alone_s: np.ndarray


@dataclass(frozen=True, slots=True)
class _Rates:
    """Seconds per unit of work at one SM count (efficiencies folded in)."""

    token: tuple[tuple[float, float, float], ...]  # per layer op: (s/token compute, s/token mem,
    head: tuple[tuple[float, float, float], ...]  # s fixed mem); head ops likewise, per row
    x_dec: float  # s per attended key (decode kernel, compute side)
    y_dec: float  # s per HBM byte (decode kernel)
    t_dec: float  # y_dec / x_dec: rows with attended / bytes above it are compute-bound
    x_pre: float  # likewise, prefill kernel
    y_pre: float
    t_pre: float
    memo: dict = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class OpSums:
    """Per-model constants: FLOP and byte coefficients summed over the operators (computed once
    per LatencyModel instead of per prediction)."""

    tok_f: float
    tok_b: float
    tok_w: float
    head_f: float
    head_b: float
    head_w: float


class LatencyModel:
    """Predicts iteration latency of `model` on `hardware` (see docs/architecture.md).

    Every operator takes ``max(FLOPs / (compute(S) * eff_c), bytes / (bandwidth(S) * eff_b))``;
    the total is ``layers * (token ops + attention + all-reduce) + LM head``.

    `predict_many` / `predict_concurrent_totals` evaluate a whole menu of SM counts in one numpy
    pass; they equal `predict` / `predict_concurrent` at each entry bit for bit.
    """

    def __init__(
        self, hardware: HardwareSpec, model: ModelSpec, calibration: Calibration | None = None
    ) -> None:
        cal = calibration if calibration is not None else Calibration()
        if cal.bw_knee is not None and cal.bw_hill is not None:
            hardware = hardware.with_curve(cal.bw_knee, cal.bw_hill)
        self.hardware = hardware
        self.model = model
        self.calibration = cal
        self.token_ops = layer_token_ops(model)
        self.head_ops = lm_head_ops(model)
        self.att = attention_coeffs(model)
        tok, head = self.token_ops, self.head_ops
        self.op_sums = OpSums(
            sum(op.f for op in tok), sum(op.b for op in tok), sum(op.w for op in tok),
            sum(op.f for op in head), sum(op.b for op in head), sum(op.w for op in head),
        )  # fmt: skip
        self._rates: dict[int, _Rates] = {}
        self._tables: dict[tuple[int, ...], SmTable] = {}
        self._last_table: tuple[tuple[int, ...], SmTable] | None = None
        self._last_table_2: tuple[tuple[int, ...], SmTable] | None = None
        self.memo_key = object()  # this model's slot in Batch.memo / KernelRows.memo
        # Communication does not depend on the SM count (NVLink bound; NCCL's few SMs ignored).
        self._link_s_per_byte = 1.0 / (hardware.link_bw * cal.link)
        self._max_bw_eff = max(cal.efficiency(k)[1] for k in ("gemm", "elementwise",
                                                                "attn_prefill", "attn_decode"))

    # --- rates ---------------------------------------------------------------------------------
    def _rates_for(self, sms: int | None) -> _Rates:
        key = self.hardware.usable_sms(sms)
        rates = self._rates.get(key)
        if rates is None:
            rates = self._rates[key] = self._build_rates(key)
        return rates

    def _build_rates(self, sms: int) -> _Rates:
        cal = self.calibration
        compute, bw = self.hardware.compute(sms), self.hardware.bandwidth(sms)

        def op_rates(ops):
            out = []
            for op in ops:
                ec, eb = cal.efficiency(op.cls)
                out.append((op.f / (compute * ec), op.b / (bw * eb), op.w / (bw * eb)))
            return tuple(out)

        fa = self.att.flops_per_attended
        dc, db = cal.efficiency("attn_decode")
        pc, pb = cal.efficiency("attn_prefill")
        x_dec, y_dec = fa / (compute * dc), 1.0 / (bw * db)
        x_pre, y_pre = fa / (compute * pc), 1.0 / (bw * pb)
        return _Rates(
            token=op_rates(self.token_ops),
            head=op_rates(self.head_ops),
            x_dec=x_dec, y_dec=y_dec, t_dec=y_dec / x_dec,
            x_pre=x_pre, y_pre=y_pre, t_pre=y_pre / x_pre,
        )  # fmt: skip

    def _table(self, sms: Sequence[int]) -> SmTable:
        last = self._last_table
        if last is not None and last[0] is sms:  # the caller's own tuple again: skip hashing
            return last[1]
        last = self._last_table_2
        if last is not None and last[0] is sms:
            return last[1]
        key = tuple(sms)
        tab = self._tables.get(key)
        if tab is None:
            tab = self._tables[key] = SmTable([self._rates_for(s) for s in key], key)
        if isinstance(sms, tuple):  # immutable: safe to recognise by identity
            self._last_table_2, self._last_table = self._last_table, (sms, tab)
        return tab

    def _prepared(self, b: Batch) -> Prepared:
        return Prepared.of(self, b)

    def link_seconds(self, tokens: int, rows: int) -> tuple[float, float]:
        """(all-reduce seconds per layer, logits-gather seconds) of a batch; 0 without TP."""
        m, cal = self.model, self.calibration
        if m.tp == 1:
            return 0.0, 0.0
        comm = 2.0 * (allreduce_link_bytes(m, tokens) * self._link_s_per_byte
                      + cal.allreduce_latency_s)
        gather = 0.0
        if rows:
            gather = (logits_gather_link_bytes(m, rows) * self._link_s_per_byte
                      + cal.allreduce_latency_s)
        return comm, gather

    # --- prediction ----------------------------------------------------------------------------
    def predict(self, batch: BatchLike, sms: int | None = None) -> Breakdown:
        """Latency of one iteration of `batch` on `sms` SMs (None: the whole GPU)."""
        return self._predict(Prepared.of(self, as_batch(batch)), sms)

    def predict_union(self, a: BatchLike, b: BatchLike, sms: int | None = None) -> Breakdown:
        """``predict(a.concat(b), sms)``, equal bit for bit, without building the
        concatenated batch (e.g. a mixed chunked-prefill batch from its decode and prefill
        parts)."""
        return self._predict(Prepared.union(self, as_batch(a), as_batch(b)), sms)

    def _predict(self, p: Prepared, sms: int | None) -> Breakdown:
        tokens = p.tokens
        if tokens == 0:
            return ZERO
        r = self._rates_for(sms)
        rows = p.rows
        memo = r.memo  # token-op and LM-head seconds depend on the counts only, which repeat
        key = (tokens, rows)
        hit = memo.get(key)
        if hit is None:
            tok = 0.0
            for kf, kb, kw in r.token:
                x = kf * tokens
                y = kb * tokens + kw
                tok += x if x > y else y
            head = 0.0
            if rows:
                for kf, kb, kw in r.head:
                    x = kf * rows
                    y = kb * rows + kw
                    head += x if x > y else y
            if len(memo) >= _MEMO_KEEP:
                memo.clear()
            hit = memo[key] = (tok, head)
        tok, head = hit
        if rows:
            head += p.gather
        att = (p.dec.seconds(r.x_dec, r.y_dec, r.t_dec)
               + p.pre.seconds(r.x_pre, r.y_pre, r.t_pre))
        L = self.model.num_layers
        comm = p.comm
        over = self.calibration.iteration_overhead_s
        return Breakdown(L * (tok + att + comm) + head + over, L * tok, L * att, L * comm, head,
                         p.flops, p.nbytes, over)

    def predict_many(self, batch: BatchLike, sms: Sequence[int]) -> Breakdowns:
        """`predict(batch, s)` for every s in `sms` at once (arrays, one entry per SM count)."""
        b = as_batch(batch)
        tab = self._table(sms)
        if b.tokens == 0:
            return Breakdowns.zero(len(tab.sms))
        return predict_table(self, self._prepared(b), tab)

    def predict_concurrent(
        self,
        decode_batch: BatchLike,
        prefill_batch: BatchLike,
        sms_decode: int,
        sms_prefill: int,
    ) -> tuple[Breakdown, Breakdown]:
        """(decode, prefill) latencies when both run at once on disjoint SM partitions.

        Each side is first predicted alone on its partition, then `combine_concurrent` applies
        the bandwidth contention (see `sglang_duet.latency.contention`).
        """
        hw = self.hardware
        if hw.usable_sms(sms_decode) + hw.usable_sms(sms_prefill) > hw.num_sms:
            raise ValueError(
                f"partitions {sms_decode} + {sms_prefill} SMs exceed {hw.num_sms} on {hw.name}"
            )
        d = self.predict(decode_batch, sms_decode)
        p = self.predict(prefill_batch, sms_prefill)
        return combine(self.bandwidth_cap(), d, p)

    def predict_concurrent_totals(
        self,
        decode_batch: BatchLike,
        prefill_batch: BatchLike,
        sms_decode: Sequence[int],
        sms_prefill: Sequence[int],
    ) -> tuple[np.ndarray, np.ndarray]:
        """``total_s`` of both sides of `predict_concurrent` for every partition pair
        ``(sms_decode[i], sms_prefill[i])`` at once: two float64 arrays, equal bit for bit to
        the scalar calls. Pass the same sequences each time: their tables are cached."""
        tab = self.predict_concurrent_table(decode_batch, prefill_batch, sms_decode, sms_prefill)
        return tab.decode_s, tab.prefill_s

    def predict_concurrent_table(
        self,
        decode_batch: BatchLike,
        prefill_batch: BatchLike,
        sms_decode: Sequence[int],
        sms_prefill: Sequence[int],
    ) -> ConcurrentTable:
        """Like `predict_concurrent_totals`, also keeping each side's time alone."""
        tab_d, tab_p = self._table(sms_decode), self._table(sms_prefill)
        if tab_d.pair_checked is not tab_p:
            hw = self.hardware
            if len(tab_d.sms) != len(tab_p.sms):
                raise ValueError("sms_decode and sms_prefill differ in length")
            for sd, sp in zip(tab_d.sms, tab_p.sms, strict=True):
                if hw.usable_sms(sd) + hw.usable_sms(sp) > hw.num_sms:
                    raise ValueError(
                        f"partitions {sd} + {sp} SMs exceed {hw.num_sms} on {hw.name}")
            tab_d.pair_checked = tab_p
        pd = Prepared.of(self, as_batch(decode_batch))
        pp = Prepared.of(self, as_batch(prefill_batch))
        # a non-empty batch takes > 0 s at every SM count (it reads the weights)
        t_d = totals_table(self, pd, tab_d) if pd.tokens else np.zeros(len(tab_d.sms))
        t_p = totals_table(self, pp, tab_p) if pp.tokens else np.zeros(len(tab_p.sms))
        c_d, c_p = combine_totals(self.bandwidth_cap(), t_d, pd.nbytes, t_p, pp.nbytes,
                                  positive=bool(pd.tokens and pp.tokens))
        return ConcurrentTable(c_d, c_p, t_d, t_p)

    def token_seconds_floor(self, sms: Sequence[int]) -> np.ndarray:
        """Per SM count, seconds per token that every batch's iteration takes at least: the
        token-level operators' compute alone (so ``predict(b, s).total_s >= floor * tokens``,
        also under contention)."""
        return self._table(sms).token_floor(self.model.num_layers)

    def combine_concurrent(self, decode: Breakdown, prefill: Breakdown
                           ) -> tuple[Breakdown, Breakdown]:
        """(decode, prefill) predicted alone on their partitions -> both under contention."""
        return combine(self.bandwidth_cap(), decode, prefill)

    def bandwidth_cap(self) -> float:
        """Most HBM B/s the device delivers to all partitions together."""
        return self.hardware.hbm_bw * self._max_bw_eff

    def contention(self, a: Breakdown, b: Breakdown) -> float:
        """Progress rate (<= 1) of two overlapping iterations sharing the device's bandwidth."""
        return progress_rate(self.bandwidth_cap(), a, b)

    # --- explanation (not on the hot path) -----------------------------------------------------
    def explain(self, batch: BatchLike, sms: int | None = None) -> list[dict[str, object]]:
        """Per-operator rows (name, class, count, flops, bytes, seconds, bound) of one iteration;
        their seconds add up to `predict(batch, sms).total_s`."""
        from .explain import explain_rows

        return explain_rows(self, as_batch(batch), sms)
