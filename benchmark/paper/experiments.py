"""The runs behind the paper's comparisons, on the simulator (``sglang_duet.sim``).

* Observation 3: Agg-vLLM (``vllm-chunked``, 2 replicas, round-robin) vs Disagg 1P1D
  (``dynamo``) on 8000-token prompts / 200 output tokens, Poisson QPS 1..8,
  ``OBS3_REQUESTS`` requests per point.
* End to end, every policy on the same arrivals (2x H100):
  Azure-Code at QPS 16 (the whole trace: 8,819 requests), Azure-Conv at QPS 16 (the whole trace:
  19,366 requests; the paper gives no Azure-Conv rate in the numbers we compare against, so we
  use Azure-Code's), Mooncake at QPS 5 (1,000 requests, uniform sample with seed 0, mean
  input/output 10,344 / 347 tokens), all Qwen3-8B TP1 x2 replicas, and Qwen3-14B TP2 (one
  replica; Dynamo: TP1 prefill + TP1 decode worker) on Azure-Code at QPS 16.

TBT SLO tau = 100 ms (the duet policy's target and the SLO metrics), TTFT SLO 10 s, budget 8192.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sglang_duet.sim import SimConfig, fixed_workload, policy_names
from sglang_duet.sim.cli import run_config

OBS3_QPS = (1, 2, 3, 4, 5, 6, 7, 8)
OBS3_REQUESTS = 200
OBS3_POLICIES = ("vllm-chunked", "dynamo")


@dataclass(frozen=True)
class E2E:
    key: str
    title: str
    trace: str
    qps: float
    num_requests: int | None
    model: str = "qwen3-8b"
    tp: int = 1


E2E_RUNS = (
    E2E("azure-code-8b", "Azure-Code, QPS 16, Qwen3-8B, 2x H100", "azure-code", 16.0, None),
    E2E("azure-conv-8b", "Azure-Conv, QPS 16, Qwen3-8B, 2x H100", "azure-conv", 16.0, None),
    E2E("mooncake-8b", "Mooncake (1,000 requests), QPS 5, Qwen3-8B, 2x H100", "mooncake", 5.0,
        1000),
    E2E("azure-code-14b-tp2", "Azure-Code, QPS 16, Qwen3-14B TP=2, 2x H100", "azure-code",
        16.0, None, "qwen3-14b", 2),
)


# Every system behind round-robin, as the paper's replicas and the committed results: not each
# system's own default router (SimConfig.router "auto"), which the capacity tables use.
PAPER_ROUTER = "round-robin"


def _log(msg: str) -> None:
    print(msg, flush=True)


def run_obs3(quick: bool = False) -> dict[str, object]:
    qps_list = (2, 6) if quick else OBS3_QPS
    n = 30 if quick else OBS3_REQUESTS
    out: dict[str, dict[str, list]] = {p: {} for p in OBS3_POLICIES}
    for qps in qps_list:
        w = fixed_workload(8000, 200, float(qps), n, seed=0)
        cfg = SimConfig(trace="fixed-8000-200", policy="all", qps=float(qps), num_requests=n,
                        router=PAPER_ROUTER)
        for policy in OBS3_POLICIES:
            rep = run_config(SimConfig(**{**cfg.to_dict(), "policy": policy}), w)
            m = rep["results"][policy]
            for key in ("ttft_mean_ms", "ttft_p99_ms", "tbt_mean_ms", "tbt_p99_ms", "total_tps",
                        "output_tps", "throughput_rps"):
                out[policy].setdefault(key, []).append(m[key])
        _log(f"  obs3 qps {qps}: done")
    return {"qps": list(qps_list), "requests_per_point": n, "results": out}


def run_e2e(quick: bool = False) -> dict[str, object]:
    out: dict[str, object] = {}
    for e in E2E_RUNS:
        n = min(e.num_requests or 10**9, 150) if quick else e.num_requests
        cfg = SimConfig(trace=e.trace, policy="all", model=e.model, tp=e.tp, gpus=2, qps=e.qps,
                        num_requests=n, seed=0, router=PAPER_ROUTER)
        t0 = time.perf_counter()
        rep = run_config(cfg)
        rep["title"] = e.title
        rep["wall_s"] = round(time.perf_counter() - t0, 1)
        out[e.key] = rep
        _log(f"  {e.key}: {len(policy_names())} policies in {rep['wall_s']} s")
    return out
