"""LatencyModel: roofline time of one forward iteration, attention per request, SM-count aware."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .batch import BatchLike, as_batch
from .calibration import Calibration
from .hardware import HardwareSpec
from .model import ModelSpec
from .ops import (
    allreduce_link_bytes,
    attention_coeffs,
    layer_token_ops,
    lm_head_ops,
    logits_gather_link_bytes,
)


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Predicted time of one iteration, seconds, plus its FLOPs and HBM bytes (one GPU).

    total_s = token_ops_s + attention_s + comm_s (all layers) + lm_head_s + overhead_s.
    `bytes` counts HBM traffic of the compute operators (weights, activations, KV cache), not
    NVLink traffic.
    """

    total_s: float
    token_ops_s: float
    attention_s: float
    comm_s: float
    lm_head_s: float
    flops: float
    bytes: float
    overhead_s: float = 0.0

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def scaled(self, factor: float) -> Breakdown:
        """Same work, every time component stretched by `factor` (used for contention)."""
        return Breakdown(
            self.total_s * factor,
            self.token_ops_s * factor,
            self.attention_s * factor,
            self.comm_s * factor,
            self.lm_head_s * factor,
            self.flops,
            self.bytes,
            self.overhead_s * factor,
        )


ZERO = Breakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True, slots=True)
class _Rates:
    """Seconds per unit of work at one SM count (efficiencies folded in)."""

    token: tuple[tuple[float, float, float], ...]  # per layer op: (s/token compute, s/token mem,
    head: tuple[tuple[float, float, float], ...]  # s fixed mem); head ops likewise, per row
    att_f_dec: float  # s per attended key (decode kernel, compute side)
    att_q_dec: float  # s per new token (decode kernel, memory side)
    att_kv_dec: float  # s per key read (decode kernel, memory side)
    att_f_pre: float
    att_q_pre: float
    att_kv_pre: float


class LatencyModel:
    """Predicts iteration latency of `model` on `hardware` (see docs/architecture.md).

    Every operator takes ``max(FLOPs / (compute(S) * eff_c), bytes / (bandwidth(S) * eff_b))``;
    the total is ``layers * (token ops + attention + all-reduce) + LM head``.
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
        self._rates: dict[int, _Rates] = {}
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

        a = self.att
        dc, db = cal.efficiency("attn_decode")
        pc, pb = cal.efficiency("attn_prefill")
        return _Rates(
            token=op_rates(self.token_ops),
            head=op_rates(self.head_ops),
            att_f_dec=a.flops_per_attended / (compute * dc),
            att_q_dec=a.bytes_per_q / (bw * db),
            att_kv_dec=a.bytes_per_kv / (bw * db),
            att_f_pre=a.flops_per_attended / (compute * pc),
            att_q_pre=a.bytes_per_q / (bw * pb),
            att_kv_pre=a.bytes_per_kv / (bw * pb),
        )

    # --- prediction ----------------------------------------------------------------------------
    def predict(self, batch: BatchLike, sms: int | None = None) -> Breakdown:
        """Latency of one iteration of `batch` on `sms` SMs (None: the whole GPU)."""
        b = as_batch(batch)
        tokens = b.tokens
        if tokens == 0:
            return ZERO
        r = self._rates_for(sms)
        m, cal = self.model, self.calibration

        tok = 0.0
        for kf, kb, kw in r.token:
            x = kf * tokens
            y = kb * tokens + kw
            tok += x if x > y else y

        if b.n_decode == b.n:  # decode only
            att = float(np.maximum(b.attended * r.att_f_dec,
                                   b.qf * r.att_q_dec + b.kvf * r.att_kv_dec).sum())
        elif b.n_decode == 0:  # prefill only
            att = float(np.maximum(b.attended * r.att_f_pre,
                                   b.qf * r.att_q_pre + b.kvf * r.att_kv_pre).sum())
        else:
            dec = b.is_decode
            f = b.attended * np.where(dec, r.att_f_dec, r.att_f_pre)
            mem = b.qf * np.where(dec, r.att_q_dec, r.att_q_pre)
            mem += b.kvf * np.where(dec, r.att_kv_dec, r.att_kv_pre)
            att = float(np.maximum(f, mem).sum())

        comm = 0.0
        if m.tp > 1:
            comm = 2.0 * (allreduce_link_bytes(m, tokens) * self._link_s_per_byte
                          + cal.allreduce_latency_s)

        rows = b.n_sample
        head = 0.0
        if rows:
            for kf, kb, kw in r.head:
                x = kf * rows
                y = kb * rows + kw
                head += x if x > y else y
            if m.tp > 1:
                head += (logits_gather_link_bytes(m, rows) * self._link_s_per_byte
                         + cal.allreduce_latency_s)

        L = m.num_layers
        a = self.att
        flops = L * (sum(op.f for op in self.token_ops) * tokens
                     + a.flops_per_attended * b.attended_sum)
        nbytes = L * (sum(op.b for op in self.token_ops) * tokens
                      + sum(op.w for op in self.token_ops)
                      + a.bytes_per_q * tokens + a.bytes_per_kv * b.kv_sum)
        if rows:
            flops += sum(op.f for op in self.head_ops) * rows
            nbytes += sum(op.b * rows + op.w for op in self.head_ops)
        over = cal.iteration_overhead_s
        return Breakdown(L * (tok + att + comm) + head + over, L * tok, L * att, L * comm, head,
                         flops, nbytes, over)

    def predict_concurrent(
        self,
        decode_batch: BatchLike,
        prefill_batch: BatchLike,
        sms_decode: int,
        sms_prefill: int,
    ) -> tuple[Breakdown, Breakdown]:
        """(decode, prefill) latencies when both run at once on disjoint SM partitions.

        Each side is first predicted alone on its partition. While both run, their combined HBM
        traffic may not exceed what the device can deliver (peak bandwidth times the best
        bandwidth efficiency of any kernel): if the two average demand rates ``bytes / time``
        add up to more, both progress at the rate ``rho = cap / (demand_d + demand_p)`` until the
        shorter finishes; the longer then runs alone at full speed. So a memory-bound decode
        slows when a prefill's traffic competes with it, and never gains from it.
        """
        hw = self.hardware
        if hw.usable_sms(sms_decode) + hw.usable_sms(sms_prefill) > hw.num_sms:
            raise ValueError(
                f"partitions {sms_decode} + {sms_prefill} SMs exceed {hw.num_sms} on {hw.name}"
            )
        d = self.predict(decode_batch, sms_decode)
        p = self.predict(prefill_batch, sms_prefill)
        rho = self.contention(d, p)
        if rho >= 1.0:
            return d, p
        short, long_ = (d, p) if d.total_s <= p.total_s else (p, d)
        short_new = short.total_s / rho
        long_new = long_.total_s + short.total_s * (1.0 / rho - 1.0)
        d_new, p_new = (short_new, long_new) if short is d else (long_new, short_new)
        return (d.scaled(d_new / d.total_s), p.scaled(p_new / p.total_s))

    def bandwidth_cap(self) -> float:
        """Most HBM B/s the device delivers to all partitions together."""
        return self.hardware.hbm_bw * self._max_bw_eff

    def contention(self, a: Breakdown, b: Breakdown) -> float:
        """Progress rate (<= 1) of two overlapping iterations sharing the device's bandwidth."""
        if a.total_s <= 0.0 or b.total_s <= 0.0:
            return 1.0
        demand = a.bytes / a.total_s + b.bytes / b.total_s
        cap = self.bandwidth_cap()
        return 1.0 if demand <= cap else cap / demand

    # --- explanation (not on the hot path) -----------------------------------------------------
    def explain(self, batch: BatchLike, sms: int | None = None) -> list[dict[str, object]]:
        """Per-operator rows (name, class, count, flops, bytes, seconds, bound) of one iteration;
        their seconds add up to `predict(batch, sms).total_s`."""
        from .explain import explain_rows

        return explain_rows(self, as_batch(batch), sms)
