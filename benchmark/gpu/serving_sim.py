"""Stage 2's bench_serving slice as the simulator predicts it, next to what was measured.

For each system the serving step ran, and each of its QPS points, the replay file bench_serving
sent (`--arrival poisson-replay`: lengths and arrival times known here) becomes a simulator
`Workload`; the system's simulator policy (`benchmark.sim_to_real.simulate.SIM_SYSTEMS`) runs it
on the model the servers ran (its config.json), the GPU's hardware profile and a calibration,
with the chunk size, KV pool and page size the server logged (`sim_to_real.real.server_settings`).
Compared, with the sim_to_real definitions (pooled inter-token gaps for TBT): TTFT P50/P99,
TBT P50/P99 (bench_serving's median TTFT, P99 TTFT, our P50 of its ITLs, its P99 ITL) and
request throughput. `ratio` = predicted / measured; `ok` uses item 6's tolerances (+-25% for
latencies, +-15% for throughput, the latter only at a saturated point).
"""

from __future__ import annotations

from pathlib import Path

from benchmark.serving.convert import read_jsonl
from benchmark.sim_to_real.real import server_settings
from benchmark.sim_to_real.report import LATENCY_TOL, SATURATED, THROUGHPUT_TOL, ratio
from benchmark.sim_to_real.simulate import METRICS, SIM_SYSTEMS, simulate_point
from benchmark.sim_to_real.workload import to_workload

# sim_to_real metric -> the serving summary's key (benchmark.serving.metrics.summarize)
MEASURED = {"ttft_p50_ms": "median_ttft_ms", "ttft_p99_ms": "p99_ttft_ms",
            "tbt_p50_ms": "p50_itl_ms", "tbt_p99_ms": "p99_itl_ms",
            "throughput_rps": "request_throughput"}
DEFAULT_CHUNK = 8192  # SGLang's default when the log names none (sim's --token-budget default)


def compare_point(measured: dict, predicted: dict, qps: float) -> dict:
    """Per metric: measured, predicted, ratio and whether it is within the tolerance."""
    saturated = (measured.get("request_throughput") or 0) < SATURATED * qps
    out = {}
    for key in METRICS:
        meas, pred = measured.get(MEASURED[key]), predicted.get(key)
        r = ratio(pred, meas)
        tol = THROUGHPUT_TOL if key == "throughput_rps" else LATENCY_TOL
        targeted = key != "throughput_rps" or saturated
        out[key] = {"measured": meas, "predicted": pred, "ratio": r,
                    "ok": (r is not None and abs(r - 1) <= tol) if targeted else None}
    return out


def predict_system(name: str, entry: dict, replay_dir: Path, model_config: str, hardware: str,
                   calibration: str, log_text: str) -> dict:
    """The simulator's prediction of every run of one system of a `benchmark.serving` result."""
    if name not in SIM_SYSTEMS:
        return {"error": f"no simulator policy for {name}"}
    settings = server_settings(log_text)
    chunk = settings.get("chunked_prefill_size")
    budget = chunk if isinstance(chunk, int) and chunk > 0 else DEFAULT_CHUNK
    kv = settings.get("max_total_num_tokens")
    out: dict = {"settings": settings, "token_budget": budget, "points": {}}
    for run in entry.get("runs") or []:
        q = run["qps"]
        path = replay_dir / f"requests_qps{q:g}.jsonl"
        if not run.get("summary"):
            continue
        rows = read_jsonl(str(path)) if path.exists() else []
        if not rows or any(r.timestamp_ms is None for r in rows):
            out["points"][f"{q:g}"] = {"error": f"{path.name}: no arrival timestamps"}
            continue
        wl = to_workload(rows, f"{name} qps {q:g}")
        try:
            page = settings.get("page_size")
            pred = simulate_point(name, wl, model_config, hardware, calibration, budget,
                                  kv if isinstance(kv, int) else None, overlap_rule=False,
                                  page_size=page if isinstance(page, int) else None,
                                  frontend=True)
        except (ValueError, RuntimeError) as e:
            out["points"][f"{q:g}"] = {"error": f"{type(e).__name__}: {e}"}
            continue
        out["points"][f"{q:g}"] = {"predicted": pred,
                                   "vs_measured": compare_point(run["summary"], pred, q)}
    return out


def attach_predictions(serving: dict, work: Path, model_dir: str, hardware: str,
                       calibration: str) -> dict:
    """Add `simulated` (the prediction) to each system of stage 2's serving result and return
    the compact table {system: {qps: {metric: ratio}}}."""
    table: dict = {}
    replay_dir = work / "serving_work"
    for name, entry in serving.get("systems", {}).items():
        if entry.get("status") != "ran":
            continue
        log = replay_dir / f"server_{name}.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        sim = predict_system(name, entry, replay_dir, str(Path(model_dir) / "config.json"),
                             hardware, calibration, text)
        sim.update(hardware=hardware, calibration=calibration)
        entry["simulated"] = sim
        table[name] = {q: {k: v["ratio"] for k, v in p["vs_measured"].items()}
                       for q, p in sim["points"].items() if "vs_measured" in p}
    return table
