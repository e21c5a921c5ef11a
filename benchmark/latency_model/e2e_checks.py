"""The DuetServe paper's own figures, held to the simulator before and after the end-to-end costs:
Fig. 1c (decode of 8 requests, 1K -> 32K context, > 4x slower: the latency model), Obs. 1
(8192-token prefill-only batch > 180 ms), Obs. 3 (8000/200-token requests on 2 x H100: Disagg
1P1D moves < 0.5x Agg-vLLM's tokens/s; Agg saturates near QPS 7) and the Azure-Code QPS 16 tail
TBTs (SGLang-Default > 680 ms; DuetServe < 150 ms)."""

from __future__ import annotations

from benchmark.latency_model.paper_observations import observations
from sglang_duet.latency import Calibration
from sglang_duet.sim import (
    SimConfig,
    build_arrivals,
    fixed_workload,
    load_trace,
    simulate,
    summarize,
)

__all__ = ["OBS3_QPS", "paper_checks"]

OBS3_QPS = (2, 4, 6, 7, 8)
OBS3_REQUESTS = 200


def _run(cfg: SimConfig, workload, policy: str) -> dict[str, object]:
    return summarize(simulate(cfg, workload, policy), cfg.tbt_slo_ms / 1e3, cfg.ttft_slo_ms / 1e3)


def _obs3(switches: dict[str, object], qps_list: tuple[int, ...], n: int) -> dict[str, object]:
    rows = []
    for qps in qps_list:
        w = fixed_workload(8000, 200, float(qps), n, seed=0)
        cfg = SimConfig(trace="fixed-8000-200", qps=float(qps), num_requests=n, **switches)
        agg = _run(cfg, w, "vllm-chunked")
        dis = _run(cfg, w, "dynamo")
        rows.append({"qps": qps, "agg_total_tps": agg["total_tps"],
                     "disagg_total_tps": dis["total_tps"],
                     "agg_ttft_mean_ms": agg["ttft_mean_ms"],
                     "agg_throughput_rps": agg["throughput_rps"],
                     "ratio": dis["total_tps"] / agg["total_tps"] if agg["total_tps"] else None})
    last = rows[-1]
    # "saturates": served below 0.97x offered (the capacity rule's keep-up test)
    sat = next((r["qps"] for r in rows if r["agg_throughput_rps"] < 0.97 * r["qps"]), None)
    return {"points": rows, "ratio_at_max_qps": last["ratio"],
            "holds": last["ratio"] is not None and last["ratio"] < 0.5,
            "agg_saturates_at_qps": sat}


def _azure_tails(switches: dict[str, object], n: int | None) -> dict[str, object]:
    cfg = SimConfig(trace="azure-code", qps=16.0, num_requests=n, **switches)
    w = build_arrivals(load_trace("azure-code"), 16.0, n, 0)
    out = {}
    for policy in ("sglang-default", "duet"):
        m = _run(cfg, w, policy)
        out[policy] = {"tbt_p99_ms": m["tbt_p99_ms"], "tbt_max_ms": m["tbt_max_ms"],
                       "throughput_rps": m["throughput_rps"]}
    sd, du = out["sglang-default"]["tbt_p99_ms"], out["duet"]["tbt_p99_ms"]
    out["sglang_default_over_680"] = sd is not None and sd > 680.0
    out["duet_under_150"] = du is not None and du < 150.0
    return out


def paper_checks(switches: dict[str, object], quick: bool = False) -> dict[str, object]:
    """Every check under one set of `SimConfig` switches (``calibration`` among them)."""
    cal = Calibration.load(str(switches.get("calibration", SimConfig().calibration)))
    obs = {r.observation.strip(): {"paper": r.paper, "model": r.model, "holds": r.holds}
           for r in observations(cal)}
    qps = (2, 8) if quick else OBS3_QPS
    return {"latency_model": obs,
            "obs3": _obs3(switches, qps, 20 if quick else OBS3_REQUESTS),
            "azure_code_qps16": _azure_tails(switches, 120 if quick else None)}
