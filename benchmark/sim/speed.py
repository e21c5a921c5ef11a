"""Simulator speed: the full Azure-Conv trace (19,366 requests) through the duet policy at the
trace's own arrival times, on this machine's CPU. Target: <= 20 s.

    PYTHONPATH=python python -m benchmark.sim.speed [--policy duet] [--repeat 1]

Writes ``benchmark/results/sim/speed.json`` through ``benchmark.stamp.write_result`` (config,
wall times, iteration and planner-call counts, the run's headline metrics; the stamp names the
commit, machine and command).
"""

from __future__ import annotations

import argparse
import os
import time

from benchmark.stamp import write_result
from sglang_duet.sim import SimConfig, build_arrivals, load_trace, simulate, summarize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "benchmark", "results", "sim", "speed.json")
TARGET_S = 20.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", default="azure-conv")
    ap.add_argument("--policy", default="duet")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args(argv)

    cfg = SimConfig(trace=args.trace, policy=args.policy)
    t0 = time.perf_counter()
    workload = build_arrivals(load_trace(cfg.trace), None, None, cfg.seed)
    load_s = time.perf_counter() - t0
    runs = []
    for _ in range(args.repeat):
        t1 = time.perf_counter()
        res = simulate(cfg, workload)
        sim_s = time.perf_counter() - t1
        metrics = summarize(res, cfg.tbt_slo_ms / 1e3, cfg.ttft_slo_ms / 1e3)
        total_s = time.perf_counter() - t1
        runs.append({"simulate_s": round(sim_s, 3), "simulate_and_metrics_s": round(total_s, 3)})
    best = min(r["simulate_and_metrics_s"] for r in runs)
    report = {
        "config": {**cfg.to_dict(), "workload": workload.summary()},
        "trace_load_s": round(load_s, 3),
        "runs": runs,
        "best_s": best,
        "target_s": TARGET_S,
        "meets_target": best + load_s <= TARGET_S,
        "iterations": metrics["iterations"],
        "planner_calls": metrics["planner_calls"],
        "us_per_iteration": round(1e6 * best / max(metrics["iterations"], 1), 2),
        "us_per_planner_call": round(1e6 * best / max(metrics["planner_calls"], 1), 1),
        "metrics": {k: metrics[k] for k in ("completed", "throughput_rps", "ttft_p99_ms",
                                            "tbt_p99_ms", "slo_attainment", "mode_share")},
    }
    write_result(args.out, report)
    print(f"{cfg.trace} ({len(workload)} requests), policy {cfg.policy}: "
          f"{best:.2f} s simulate+metrics, {load_s:.2f} s trace load; "
          f"{report['iterations']} iterations, {report['planner_calls']} planner calls; "
          f"target {TARGET_S:.0f} s: {'met' if report['meets_target'] else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
