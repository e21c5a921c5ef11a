"""What interference does to simulated runs of the policies that co-run phases (duet, pdmux)."""

from __future__ import annotations

from sglang_duet.sim import SimConfig, build_arrivals, load_trace
from sglang_duet.sim.cli import run_config

POLICIES = ("duet", "sglang-pdmux")
QPS = (24.0, 32.0, 40.0)
KEYS = ("throughput_rps", "slo_attainment", "goodput_rps", "tbt_p99_ms", "ttft_p99_ms",
        "mean_sms_decode")


def run(trace: str = "azure-code", model: str = "qwen3-8b", gpus: int = 2,
        qps: tuple[float, ...] = QPS, num_requests: int = 1000) -> list[dict[str, object]]:
    """One row per (policy, QPS): each metric with and without interference, same arrivals."""
    rows = []
    for q in qps:
        base = SimConfig(trace=trace, model=model, gpus=gpus, qps=q, num_requests=num_requests)
        workload = build_arrivals(load_trace(trace), q, num_requests, base.seed)
        for policy in POLICIES:
            row: dict[str, object] = {"policy": policy, "qps": q}
            for inter in ("none", "published"):
                cfg = SimConfig(**{**base.to_dict(), "policy": policy, "interference": inter})
                m = run_config(cfg, workload)["results"][policy]
                spatial = m["mode_share"].get("spatial", 0.0)
                row[inter] = {**{k: m.get(k) for k in KEYS}, "spatial_share": spatial}
            rows.append(row)
    return rows
