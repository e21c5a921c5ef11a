"""The physical bound: the capacity an ideal scheduler would reach on the same GPUs under the same
latency model, against which every policy's capacity is read as a share.

The ideal scheduler (issue #23, item 5) runs every prefill token at the whole device's roofline
and every decode step at the largest batch that the TBT SLO and the KV pool allow, with no
interference and no host time:

* a request's prefill costs its prompt's token operators at the per-token time of a
  ``BIG_BATCH``-token prefill (where the device is compute-bound), plus the attention of its
  own prompt (causal, from an empty cache) and its share of the TP all-reduce;
* a decode token costs ``t(B*) / B*`` where ``t(B)`` is a decode step of B requests at the
  trace's mean decode context (prompt + half the output) and ``B*`` the largest B with
  ``t(B) <= tau`` whose KV fits the pool;
* capacity = replicas / mean(prefill + output tokens x per-token decode cost) over the trace.

It charges decode steps as a decode-only instance would run them. A scheduler that rides decode
rows on a prefill iteration's weight reads (chunked prefill, duet's mixed batches) pays less for
them, so on prefill-heavy traces it can come close to this figure. ``compute_floor_qps`` is a
bound no schedule can pass under the model: every token of every request, prompt and output,
at the compute roofline's per-token time, plus its own attention (a prompt's causal attention;
an output token's read of its KV at the device's full bandwidth), no weight reads at all.
Seconds, tokens, requests per second.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sglang_duet.latency import Batch, Calibration, LatencyModel, get_hardware, get_model
from sglang_duet.sim import SimConfig, load_trace
from sglang_duet.sim.kvcache import size_kv_cache

__all__ = ["BIG_BATCH", "physical_bound"]

BIG_BATCH = 16384


def _device_s(lat: LatencyModel, b: Batch) -> float:
    """An iteration's time without host overhead."""
    bd = lat.predict(b)
    return bd.total_s - bd.host_s


def physical_bound(cfg: SimConfig) -> dict[str, Any]:
    """The bound for ``cfg``'s trace, model, GPUs, TP and SLO (the module docstring)."""
    hw = get_hardware(cfg.hardware)
    model = get_model(cfg.model, cfg.tp)
    lat = LatencyModel(hw, model, Calibration.load(cfg.calibration))
    trace = load_trace(cfg.trace)
    p, o = trace.input_len.astype(np.int64), trace.output_len.astype(np.int64)
    big = lat.predict(Batch([BIG_BATCH], [0]))
    per_token = (big.token_ops_s + big.comm_s) / BIG_BATCH
    # each prompt's own attention: the attention share of its prefill alone
    att = np.array([lat.predict(Batch([int(n)], [0])).attention_s for n in np.unique(p)])
    att_of = dict(zip(np.unique(p).tolist(), att.tolist(), strict=True))
    prefill_s = p * per_token + np.array([att_of[int(n)] for n in p])
    ctx = int(p.mean() + o.mean() / 2)
    kv = size_kv_cache(hw.hbm_bytes, model.weight_bytes, model.kv_bytes_per_token,
                       cfg.mem_fraction, int(cfg.activation_reserve_gb * 1e9))
    b_kv = max(1, kv.capacity_tokens // max(ctx, 1))
    tau = cfg.tbt_slo_ms / 1e3
    lo, hi = 1, b_kv
    if _device_s(lat, Batch.decode(1, ctx)) > tau:
        raise ValueError(f"one decode at context {ctx} already misses tau")
    while lo < hi:  # the largest batch whose step meets tau (step time grows with B)
        mid = (lo + hi + 1) // 2
        if _device_s(lat, Batch.decode(mid, ctx)) <= tau:
            lo = mid
        else:
            hi = mid - 1
    b_star = lo
    per_decode_token = _device_s(lat, Batch.decode(b_star, ctx)) / b_star
    work = prefill_s + o * per_decode_token
    replicas = cfg.gpus // cfg.tp
    kv_read_s = model.kv_bytes_per_token / lat.bandwidth_cap  # one cached token, one step
    floor = prefill_s + o * per_token + kv_read_s * (o * p + o * (o - 1) / 2)
    return {
        "capacity_qps": round(replicas / float(work.mean()), 4),
        "compute_floor_qps": round(replicas / float(floor.mean()), 4),
        "prefill_share": round(float(prefill_s.mean() / work.mean()), 4),
        "prefill_s_per_request": round(float(prefill_s.mean()), 6),
        "decode_s_per_request": round(float((o * per_decode_token).mean()), 6),
        "decode_batch": b_star,
        "decode_context": ctx,
        "kv_batch_limit": b_kv,
        "replicas": replicas,
    }
