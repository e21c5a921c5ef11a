"""Reduce one bench_serving result (JSONL line, --output-details) to the comparison's metrics."""

from __future__ import annotations

import numpy as np

# Kept from bench_serving's result; the per-request lists and server_info are dropped.
KEEP = (
    "completed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
    "input_throughput", "output_throughput", "total_throughput", "mean_ttft_ms", "median_ttft_ms",
    "p90_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms",
    "median_itl_ms", "p90_itl_ms", "p95_itl_ms", "p99_itl_ms", "mean_e2e_latency_ms",
    "median_e2e_latency_ms", "p99_e2e_latency_ms", "concurrency", "max_concurrent_requests",
    "request_rate", "dataset_name", "tag",
)


def slo_attainment(result: dict, ttft_slo_ms: float, tbt_slo_ms: float) -> float:
    """Share of requests whose TTFT <= ttft_slo and every inter-token gap <= tbt_slo.

    A failed request counts as a miss. Needs bench_serving's --output-details lists.
    """
    ttfts = result.get("ttfts") or []
    itls = result.get("itls") or []
    errors = result.get("errors") or [None] * len(ttfts)
    if not ttfts:
        return 0.0
    ok = 0
    for ttft, itl, err in zip(ttfts, itls, errors, strict=False):
        if err or not ttft:
            continue
        if ttft * 1000.0 <= ttft_slo_ms and (not itl or max(itl) * 1000.0 <= tbt_slo_ms):
            ok += 1
    return ok / len(ttfts)


def summarize(result: dict, requests: int, ttft_slo_ms: float, tbt_slo_ms: float) -> dict:
    out = {k: result.get(k) for k in KEEP}
    gaps = [g for itl in (result.get("itls") or []) for g in itl]
    out["max_itl_ms"] = float(max(gaps) * 1000.0) if gaps else None
    out["p50_itl_ms"] = float(np.percentile(gaps, 50) * 1000.0) if gaps else None
    out["requests"] = requests
    out["failed"] = sum(1 for e in (result.get("errors") or []) if e)
    out["slo_attainment"] = slo_attainment(result, ttft_slo_ms, tbt_slo_ms)
    return out
