"""LatencyModel: the public face of the roofline model (see `reference.py` for the formula)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from . import reference
from .batch import Batch, BatchLike, as_batch
from .breakdown import ZERO, Breakdown
from .calibration import Calibration
from .contention import combine, combine_pair, combine_totals, stretched
from .fast import Prepared, Rates, SmTable, check_pair, check_pairs
from .fast.rows import rows_py
from .fast.tables import OpSums
from .hardware import HardwareSpec
from .interference import Interference, resolve_interference, slowdown
from .model import ModelSpec
from .ops import attention_coeffs, layer_token_ops, lm_head_ops

__all__ = ["ZERO", "Breakdown", "ConcurrentTable", "LatencyModel"]


class ConcurrentTable(NamedTuple):
    """`predict_concurrent` totals over a menu of partition pairs (arrays, seconds)."""

    decode_s: np.ndarray  # under contention
    prefill_s: np.ndarray
    decode_alone_s: np.ndarray  # each side alone on its partition
    prefill_alone_s: np.ndarray


class LatencyModel:
    """Predicts iteration latency of `model` on `hardware` (see docs/architecture.md).

    `predict`, `predict_union` and the menu-wide `predict_concurrent_table` run on the fast path
    (`fast/`), which equals `reference.predict` (tests); `explain` runs on the reference itself.
    Host overhead: `predict` times a CPU-scheduled pass; in `predict_concurrent` the decode side
    is one step of a look-ahead run and the prefill side carries the iteration's once-costs
    (`reference.host_fixed`) and starts after decode step 0's launch (`reference.start_delay`).
    `interference`: how concurrent partitions slow each other beyond the HBM cap
    (`interference.py`): "published", "none" (the default here: the bare roofline; the
    simulator and the runtime pass `DEFAULT_INTERFERENCE`) or explicit coefficients.
    """

    def __init__(
        self, hardware: HardwareSpec, model: ModelSpec, calibration: Calibration | None = None,
        interference: str | Interference | None = None,
    ) -> None:
        cal = calibration if calibration is not None else Calibration()
        if cal.bw_knee is not None and cal.bw_hill is not None:
            hardware = hardware.with_curve(cal.bw_knee, cal.bw_hill)
        self.hardware, self.model, self.calibration = hardware, model, cal
        self.token_ops, self.head_ops = layer_token_ops(model), lm_head_ops(model)
        self.att = attention_coeffs(model)
        self.op_sums = OpSums.of(self.token_ops, self.head_ops)
        self._rates: dict[int, Rates] = {}
        self._tables: dict[tuple[int, ...], SmTable] = {}
        self._floors: dict[tuple[int, ...], np.ndarray] = {}
        self._growth: dict[int, tuple[float, float, float]] = {}  # growth_floor, per token count
        self.memo_key = object()  # this model's slot in Batch.memo / KernelRows.memo
        self._host = {(d, k): reference.host_fixed(model, cal, d, k)
                      for d in (False, True) for k in reference.HOST_KINDS}
        self._host_row = reference.host_per_row(cal)
        self._start: dict[str | None, float] = {
            k: reference.start_delay(model, cal, k) for k in (None, *reference.HOST_KINDS)}
        effs = [cal.efficiency(k) for k in ("gemm", "elementwise", "attn_prefill", "attn_decode")]
        self.bandwidth_cap = hardware.hbm_bw * max(e[1] for e in effs)  # B/s for all partitions
        self.interference = inter = resolve_interference(interference, hardware)
        if inter is not None:  # seconds per FLOP of the prefill / per HBM byte of the decode
            self._k_dec = inter.decode / (hardware.flops * max(e[0] for e in effs))
            self._k_pre = inter.prefill_bandwidth / self.bandwidth_cap

    def link_seconds(self, tokens: int, rows: int) -> tuple[float, float]:
        """(all-reduce seconds per layer, logits-gather seconds) of a batch; 0 without TP."""
        return reference.link_seconds(self.model, self.hardware, self.calibration, tokens, rows)

    def host_seconds(self, decode_only: bool, kind: str = "scheduled", rows: int = 0) -> float:
        """Host overhead of one pass with `rows` sampling rows (`reference.host_seconds`)."""
        reference.check_host_kind(kind)
        return self._host[decode_only, kind] + rows * self._host_row

    def _host_of(self, p: Prepared, kind: str, after: str | None = None) -> float:
        return self._host[not p.pre.n, kind] + self._start[after] + p.rows * self._host_row

    def _rates_for(self, sms: int | None) -> Rates:
        key = self.hardware.usable_sms(sms)
        rates = self._rates.get(key)
        if rates is None:
            rates = self._rates[key] = Rates.build(self, key)
        return rates

    def _table(self, sms: Sequence[int]) -> SmTable:
        key = tuple(sms)
        tab = self._tables.get(key)
        if tab is None:
            tab = self._tables[key] = SmTable([self._rates_for(s) for s in key], key)
        return tab

    def _predict(self, p: Prepared, sms: int | None, kind: str, after: str | None = None
                 ) -> Breakdown:
        if p.tokens == 0:
            return ZERO
        return p.predict(self._rates_for(sms), self.model.num_layers,
                         self._host_of(p, kind, after))

    def predict(self, batch: BatchLike, sms: int | None = None, host: str = "scheduled",
                after: str | None = None) -> Breakdown:
        """Latency of one iteration of `batch` on `sms` SMs (None: all); `host`: which host
        overhead the pass pays (`reference.host_fixed`; default a CPU-scheduled pass);
        `after`: the host kind of a decode step launched first (`reference.start_delay`)."""
        reference.check_host_kind(host)
        if after is not None:
            reference.check_host_kind(after)
        return self._predict(Prepared.of(self, as_batch(batch)), sms, host, after)

    def predict_union(self, a: BatchLike, b: BatchLike, sms: int | None = None) -> Breakdown:
        """``predict(a.concat(b), sms)``, bit for bit, without building the concatenation."""
        return self._predict(Prepared.union(self, as_batch(a), as_batch(b)), sms, "scheduled")

    def predict_with_rows(self, a: Batch, q: list[int], c: list[int], n_sample: int
                          ) -> Breakdown:
        """``predict_union(a, Batch(q, c, sample))`` where ``n_sample`` of the few rows (q, c)
        sample, bit for bit, without building the second batch: the SLO-sized search's probes.
        Trusted input: equal-length lists of ints >= 0 (a plan's chunks)."""
        return self._predict(Prepared.union_rows(self, a, rows_py(q, c), n_sample), None,
                             "scheduled")

    def total_with_rows(self, a: Batch, q: list[int], c: list[int], n_sample: int) -> float:
        """``predict_with_rows(a, q, c, n_sample).total_s``, bit for bit; for one prefill row
        beside a decode-only ``a`` (the SLO-sized search's usual probe: a prefix within the
        first chunk) without building the row's batch records (`Prepared.total_with_row`)."""
        if len(q) == 1 and q[0] > 1:
            pa = Prepared.of(self, a)
            if pa.tokens and not pa.pre.n:  # the mixed batch's host time, as _host_of's
                host = self._host[False, "scheduled"] + (pa.rows + n_sample) * self._host_row
                return pa.total_with_row(self, self._rates_for(None), q[0], c[0], n_sample,
                                         host)
        return self.predict_with_rows(a, q, c, n_sample).total_s

    def predict_reference(self, batch: BatchLike, sms: int | None = None,
                          host: str = "scheduled", after: str | None = None) -> Breakdown:
        """`predict` computed by `reference.predict` (slow; what the fast path must equal)."""
        b = as_batch(batch)
        host_s = 0.0
        if b.tokens:
            host_s = reference.host_seconds(self.model, self.calibration, b.n_decode == b.tokens,
                                            host, b.n_sample, after)
        return reference.predict(self.hardware, self.model, self.calibration, b, sms, host_s)

    def predict_concurrent(self, decode_batch: BatchLike, prefill_batch: BatchLike,
                           sms_decode: int, sms_prefill: int, decode_host: str = "lookahead"
                           ) -> tuple[Breakdown, Breakdown]:
        """(decode step, prefill) latencies when both run at once on disjoint SM partitions:
        each side alone on its partition, then the bandwidth cap (`contention.py`) and the
        interference (`interference.py`). ``decode_host``: the decode step's host kind (a graph
        replay, or eager launches); the prefill starts after step 0's launch."""
        check_pair(self.hardware, sms_decode, sms_prefill)
        reference.check_host_kind(decode_host)
        pd = Prepared.of(self, as_batch(decode_batch))
        d = self._predict(pd, sms_decode, decode_host)
        p = self._predict(Prepared.of(self, as_batch(prefill_batch)), sms_prefill, "spatial",
                          decode_host if pd.tokens else None)
        c_d, c_p = combine(self.bandwidth_cap, d, p)
        if self.interference is None or d.total_s <= 0.0 or p.total_s <= 0.0:
            return c_d, c_p
        e_d, e_p = slowdown(self._k_dec * p.flops, self.interference.decode_max,
                            self._k_pre * d.bytes, d.total_s, p.total_s, d.host_s,
                            p.comm_s + p.host_s)
        return stretched(c_d, c_d.total_s + e_d), stretched(c_p, c_p.total_s + e_p)

    def predict_concurrent_table(self, decode_batch: BatchLike, prefill_batch: BatchLike,
                                 sms_decode: Sequence[int], sms_prefill: Sequence[int],
                                 decode_host: str = "lookahead") -> ConcurrentTable:
        """`predict_concurrent` totals for every pair ``(sms_decode[i], sms_prefill[i])``, bit
        for bit the scalar calls, plus each side's time alone. Pass the same sequences each
        time: their tables are cached."""
        tab_d, tab_p = self._table(sms_decode), self._table(sms_prefill)
        check_pairs(self.hardware, tab_d, tab_p)
        pd = Prepared.of(self, as_batch(decode_batch))
        pp = Prepared.of(self, as_batch(prefill_batch))
        L = self.model.num_layers
        # a non-empty batch takes > 0 s at every SM count (it reads the weights)
        t_d = (tab_d.totals(pd, L, self._host_of(pd, decode_host)) if pd.tokens
               else np.zeros(len(tab_d.sms)))
        after = decode_host if pd.tokens else None  # the prefill waits for step 0's launch
        t_p = (tab_p.totals(pp, L, self._host_of(pp, "spatial", after)) if pp.tokens
               else np.zeros(len(tab_p.sms)))
        both = bool(pd.tokens and pp.tokens)
        c_d, c_p = combine_totals(self.bandwidth_cap, t_d, pd.nbytes, t_p, pp.nbytes,
                                  positive=both)
        if self.interference is not None and both:  # the Breakdowns' host_s, comm_s + host_s
            h_d = self._host_of(pd, decode_host)
            i_p = L * pp.comm + self._host_of(pp, "spatial", after)
            e_d, e_p = slowdown(self._k_dec * pp.flops, self.interference.decode_max,
                                self._k_pre * pd.nbytes, t_d, t_p, h_d, i_p)
            c_d, c_p = c_d + e_d, c_p + e_p
        return ConcurrentTable(c_d, c_p, t_d, t_p)

    def predict_concurrent_lists(self, decode_batch: BatchLike, prefill_batch: BatchLike,
                                 sms_decode: Sequence[int], sms_prefill: Sequence[int],
                                 decode_host: str = "lookahead"
                                 ) -> tuple[list[float], list[float]]:
        """`predict_concurrent_table`'s ``(decode_s, prefill_s)`` as lists, entry by entry in
        Python floats: the same values bit for bit (the same operations per entry), sooner for
        a short menu, where numpy's per-call overhead costs more than the arithmetic (the
        runtime's green-context menu has 6 entries)."""
        tab_d, tab_p = self._table(sms_decode), self._table(sms_prefill)
        check_pairs(self.hardware, tab_d, tab_p)
        pd = Prepared.of(self, as_batch(decode_batch))
        pp = Prepared.of(self, as_batch(prefill_batch))
        if not (pd.tokens and pp.tokens):  # an empty side: the table's masked path
            tab = self.predict_concurrent_table(decode_batch, prefill_batch, sms_decode,
                                                sms_prefill, decode_host)
            return tab.decode_s.tolist(), tab.prefill_s.tolist()
        L, cap, inter = self.model.num_layers, self.bandwidth_cap, self.interference
        h_d, h_p = self._host_of(pd, decode_host), self._host_of(pp, "spatial", decode_host)
        b_d, b_p = pd.nbytes, pp.nbytes
        if inter is not None:  # as in predict_concurrent_table
            k_d, m, k_p, i_p = self._k_dec * pp.flops, inter.decode_max, self._k_pre * b_d, (
                L * pp.comm + h_p)
        out_d: list[float] = []
        out_p: list[float] = []
        for r_d, r_p in zip(tab_d.rates, tab_p.rates, strict=True):
            t_d, t_p = pd.total(r_d, L, h_d), pp.total(r_p, L, h_p)
            c_d, c_p = combine_pair(cap, t_d, b_d, t_p, b_p)
            if inter is not None:
                e_d, e_p = slowdown(k_d, m, k_p, t_d, t_p, h_d, i_p)
                c_d, c_p = c_d + e_d, c_p + e_p
            out_d.append(c_d)
            out_p.append(c_p)
        return out_d, out_p

    def token_seconds_floor(self, sms: Sequence[int]) -> np.ndarray:
        """Per SM count, seconds per token that every batch's iteration takes at least: the
        token-level operators' compute alone (so ``predict(b, s).total_s >= floor * tokens``,
        also under contention)."""
        key = tuple(sms)
        floor = self._floors.get(key)
        if floor is None:  # asked every plan (the SLO-sized batch's bound): computed once
            floor = self._floors[key] = self.model.num_layers * self._table(key).floor
            floor.flags.writeable = False
        return floor

    def growth_floor(self, tokens: int) -> tuple[float, float, float]:
        """What a whole-GPU iteration's time grows by, at least, all layers: ``(T, slope, key)``
        with T the token operators' seconds at ``tokens`` tokens and ``slope`` their seconds per
        token just above it, so that T + slope * (n - tokens) stays below their time at any n
        (each operator's ``max(f * n, b * n + w)`` is convex in n: a tangent stays below it);
        ``key``: attention seconds per attended key, at least (a row takes at least its keys'
        compute on the cheaper kernel). The SLO-sized search's rate bound (`policy.sized`), which
        asks at multiples of 64 tokens: memoised."""
        hit = self._growth.get(tokens)
        if hit is None:
            r = self._rates_for(None)
            slope = 0.0  # the slope of ops_seconds' per-operator max on the side it takes
            for kf, kb, kw in r.token:
                x, y = kf * tokens, kb * tokens + kw
                slope += kf if x > y else kb if x < y else max(kf, kb)
            layers = self.model.num_layers
            if len(self._growth) >= 1024:
                self._growth.clear()
            hit = self._growth[tokens] = (layers * r.ops_seconds(tokens, 0)[0], layers * slope,
                                          layers * min(r.x_pre, r.x_dec))
        return hit

    def explain(self, batch: BatchLike, sms: int | None = None) -> list[dict[str, object]]:
        """Per-operator rows (name, class, count, flops, bytes, seconds, bound) of one iteration;
        their seconds add up to `predict(batch, sms).total_s`."""
        b = as_batch(batch)
        host = self.predict_reference(b, sms).host_s
        return reference.explain(self.hardware, self.model, self.calibration, b, sms, host)
