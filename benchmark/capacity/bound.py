"""The physical bound: the capacity an ideal scheduler would reach on the same GPUs under the same
latency model, against which every policy's capacity is read as a share.

The ideal scheduler (issue #23, item 5) has no host time, no interference beyond the HBM cap
(`latency.contention`), one LRU prefix cache as large as every replica's KV pool together
(filled in arrival order), and may run its decodes in any of
these *configurations*, switching between them freely:

* ``prefill only``: the whole device prefilling. A request's prefill costs its new (uncached)
  prompt tokens at the per-token time of a ``BIG_BATCH``-token prefill (where the device is
  compute-bound) plus the attention of those tokens over its context (the cached prefix and
  its own causal part) and its share of the TP all-reduce;
* ``decode only``: the whole device decoding the largest batch ``B*`` whose step meets tau and
  whose KV fits the pool, at the trace's mean decode context (prompt + half the output);
* ``split S``: decode on S SMs (the largest batch that meets tau there while a big prefill runs
  beside it, the HBM cap shared) and prefill on the rest, as pdmux and duet do;
* ``mixed B``: B decodes riding in a whole-device iteration with the most prefill tokens that
  keep it within tau, as chunked prefill does (the prefill tokens' attention charged at the
  trace's mean attention seconds per new token).

Each configuration ``i`` sustains ``a_i`` requests/s of prefill and ``d_i`` requests/s of decode
(its decode tokens per second over the mean output length). Switching between them gives every
convex combination, and the bound is the highest ``min(a, d)`` over those (a two-resource
linear program, solved exactly: the optimum is a configuration or a point of a segment between
two of them where ``a = d``). Switching freely is itself a relaxation (a running decode would
stall in a prefill-only stretch), as is the one shared cache: the bound errs high.
``serial_qps`` is the mixture of ``prefill only`` and ``decode only`` alone (the bound before
the concurrent and mixed configurations were added, which pdmux passed on azure-conv).

``compute_floor_qps`` is a looser bound: no weight reads at all, and compute overlapping HBM
traffic perfectly. Per request, compute is every token, prompt (uncached) and output, at the
compute roofline's per-token time plus the prompt's attention; traffic is every output token's
read of its KV at the device's full bandwidth; the floor is the larger of the two means.

The trace is taken whole, in the capacity runs' sampled order (``build_arrivals`` with the
config's seed), which sets whose prefix is cached first. Seconds, tokens, requests per second.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sglang_duet.latency import Batch, Calibration, LatencyModel, get_hardware, get_model
from sglang_duet.sim import SimConfig, build_arrivals, load_trace
from sglang_duet.sim.kvcache import size_kv_cache
from sglang_duet.sim.prefix_cache import PrefixCache

__all__ = ["BIG_BATCH", "best_mixture", "physical_bound", "prefix_hits"]

BIG_BATCH = 16384
_MAX_CHUNK = 1 << 17  # most prefill tokens a mixed configuration is searched over


def prefix_hits(prompts: np.ndarray, hashes: Sequence[Sequence[int]] | None,
                capacity_tokens: int) -> np.ndarray:
    """Cached prompt tokens per request, in order, under one LRU prefix cache of
    ``capacity_tokens`` (`sim.prefix_cache`: leading cached blocks, at most ``prompt - 1``).
    Zeros without hashes."""
    out = np.zeros_like(prompts)
    if hashes is None:
        return out
    cache = PrefixCache()
    for i, (p, hs) in enumerate(zip(prompts.tolist(), hashes, strict=True)):
        out[i] = cache.lookup(hs, p, capacity_tokens)
        cache.insert(hs)
    return out


def best_mixture(points: Sequence[tuple[float, float]]) -> tuple[float, dict[int, float]]:
    """The highest ``min(a, d)`` over convex combinations of ``points`` (a, d), with the
    combination (index -> share of time). A single point, or two points mixed where a = d."""
    ab = np.asarray(points, dtype=float)
    lows = ab.min(axis=1)
    i = int(lows.argmax())
    best, mix = float(lows[i]), {i: 1.0}
    g = ab[:, 0] - ab[:, 1]  # a - d: the optimum of a mixture of two lies where it is 0
    for i in np.flatnonzero(g > 0):
        j = np.flatnonzero(g < 0)
        f = -g[j] / (g[i] - g[j])  # share of point i
        val = f * ab[i, 0] + (1 - f) * ab[j, 0]
        k = int(val.argmax())
        if val[k] > best:
            best, mix = float(val[k]), {int(i): float(f[k]), int(j[k]): float(1 - f[k])}
    return best, mix


class _Ideal:
    """The configurations' rates for one trace sample on one replica (the module docstring)."""

    def __init__(self, cfg: SimConfig) -> None:
        hw = self.hw = get_hardware(cfg.hardware)
        model = get_model(cfg.model, cfg.tp)
        self.lat = LatencyModel(hw, model, Calibration.load(cfg.calibration))
        trace = load_trace(cfg.trace)
        work = build_arrivals(trace, 1.0, len(trace), cfg.seed)
        p = work.input_len.astype(np.int64)
        self.o = work.output_len.astype(np.int64)
        kv = size_kv_cache(hw.hbm_bytes, model.weight_bytes, model.kv_bytes_per_token,
                           cfg.mem_fraction, int(cfg.activation_reserve_gb * 1e9))
        # one cache as large as every replica's whole KV pool together
        self.cache_tokens = kv.capacity_tokens * (cfg.gpus // cfg.tp)
        self.hit = prefix_hits(p, work.hash_ids, self.cache_tokens)
        self.p, self.new = p, p - self.hit
        self.prefill_rows = Batch(self.new, self.hit)
        self.ctx = int(p.mean() + self.o.mean() / 2)
        self.b_kv = max(1, kv.capacity_tokens // max(self.ctx, 1))
        self.tau = cfg.tbt_slo_ms / 1e3
        self.kv_read_s = model.kv_bytes_per_token / self.lat.bandwidth_cap

    def device_s(self, b: Batch, sms: int | None = None) -> float:
        bd = self.lat.predict(b, sms)
        return bd.total_s - bd.host_s

    def per_token_s(self, sms: int | None = None) -> float:
        big = self.lat.predict(Batch([BIG_BATCH], [0]), sms)
        return (big.token_ops_s + big.comm_s) / BIG_BATCH

    def rows_s(self, new, cached, sms: int | None = None) -> float:
        """Ideal seconds to prefill rows of ``new`` tokens after ``cached`` ones on ``sms`` SMs
        alone: every new token at the big-batch per-token time, plus the rows' attention."""
        att = self.lat.predict(Batch(new, cached), sms).attention_s
        return float(sum(new)) * self.per_token_s(sms) + att

    def prefill_s(self, sms: int | None = None) -> float:
        """Mean prefill seconds per request on ``sms`` SMs alone."""
        return self.rows_s(self.new, self.hit, sms) / len(self.new)

    def decode_rate(self, step_s) -> tuple[int, float]:
        """(the largest decode batch B <= the KV limit with ``step_s(B) <= tau``, its step
        time), or (0, 0.0) when one decode misses tau (step time grows with B)."""
        if step_s(1) > self.tau:
            return 0, 0.0
        lo, hi = 1, self.b_kv
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if step_s(mid) <= self.tau else (lo, mid - 1)
        return lo, step_s(lo)

    def split(self, s_d: int, alone_p: float) -> tuple[float, float, int]:
        """(a, d, B) of decode on ``s_d`` SMs beside a prefill on the rest."""
        s_p = self.hw.num_sms - s_d
        big = Batch([BIG_BATCH], [0])

        def both(b: int):
            d, p = self.lat.predict_concurrent(Batch.decode(b, self.ctx), big, s_d, s_p)
            return d.total_s - d.host_s, p.total_s / self.lat.predict(big, s_p).total_s

        b, t = self.decode_rate(lambda n: both(n)[0])
        stretch = both(b)[1] if b else 1.0
        return 1.0 / (alone_p * stretch), (b / t / self.o.mean() if b else 0.0), b

    def mixed(self, b: int, att_per_token: float) -> tuple[float, float, int]:
        """(a, d, P) of ``b`` decodes with the most prefill tokens P in one iteration <= tau."""
        dec = Batch.decode(b, self.ctx)
        dec_att = self.lat.predict(dec).attention_s

        def t(n: int) -> float:
            if n == 0:
                return self.device_s(dec)
            bd = self.lat.predict_union(dec, Batch([n], [0]))
            return bd.total_s - bd.host_s - (bd.attention_s - dec_att) + n * att_per_token

        if t(0) > self.tau:
            return 0.0, 0.0, 0
        lo, hi = 0, _MAX_CHUNK
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if t(mid) <= self.tau else (lo, mid - 1)
        step = t(lo)
        return lo / float(self.new.mean()) / step, b / step / self.o.mean(), lo


def _configurations(ideal: _Ideal) -> tuple[list[str], list[tuple[float, float]], float, int,
                                             float]:
    """(labels, (a, d) points of every configuration, the mean prefill seconds alone, B*, its
    step seconds) for one replica (the module docstring)."""
    hw, o, tpc = ideal.hw, ideal.o, ideal.hw.sms_per_tpc
    pre_s = ideal.prefill_s()
    b_star, t_star = ideal.decode_rate(lambda n: ideal.device_s(Batch.decode(n, ideal.ctx)))
    if b_star == 0:
        raise ValueError(f"one decode at context {ideal.ctx} already misses tau")
    labels, points = ["prefill only", "decode only"], [(1.0 / pre_s, 0.0),
                                                         (0.0, b_star / t_star / o.mean())]
    for s_d in range(tpc, hw.num_sms, tpc):
        a, d, b = ideal.split(s_d, ideal.prefill_s(hw.num_sms - s_d))
        if b:
            labels.append(f"split {s_d} decode SMs (B={b})")
            points.append((a, d))
    att_per_token = (ideal.lat.predict(ideal.prefill_rows).attention_s / float(ideal.new.sum()))
    for b in np.unique(np.geomspace(1, ideal.b_kv, 40).astype(int)).tolist():
        a, d, n = ideal.mixed(b, att_per_token)
        if n:
            labels.append(f"mixed B={b} + {n} prefill tokens")
            points.append((a, d))
    return labels, points, pre_s, b_star, t_star


def physical_bound(cfg: SimConfig) -> dict[str, Any]:
    """The bound for ``cfg``'s trace, model, GPUs, TP and SLO (the module docstring)."""
    ideal = _Ideal(cfg)
    o = ideal.o
    labels, points, pre_s, b_star, t_star = _configurations(ideal)
    replicas = cfg.gpus // cfg.tp
    best, mix = best_mixture(points)
    serial, _ = best_mixture(points[:2])
    per_decode_token = t_star / b_star
    per_token = ideal.per_token_s()
    # the floor: compute and HBM traffic overlap at best, so the larger of the two sums
    compute_s = pre_s + float(o.mean()) * per_token
    kv_s = ideal.kv_read_s * float((o * ideal.p + o * (o - 1) / 2).mean())
    return {
        "capacity_qps": round(replicas * best, 4),
        "mixture": {labels[i]: round(f, 4) for i, f in sorted(mix.items())},
        "serial_qps": round(replicas * serial, 4),
        "compute_floor_qps": round(replicas / max(compute_s, kv_s), 4),
        "prefill_share": round(pre_s / (pre_s + float(o.mean()) * per_decode_token), 4),
        "prefill_s_per_request": round(pre_s, 6),
        "decode_s_per_request": round(float(o.mean()) * per_decode_token, 6),
        "prefix_hit_share": round(float(ideal.hit.sum() / ideal.p.sum()), 4),
        "decode_batch": b_star,
        "decode_context": ideal.ctx,
        "kv_batch_limit": ideal.b_kv,
        "replicas": replicas,
    }
