"""``python -m benchmark.capacity.misses``: what limits each case's capacity, in missed requests.

For each named case, duet and the best-tuned alternative each run at their best setting (read
from the committed sweep JSON) at their capacity at the sweep's run length and at ``--over``
times it (just past the capacity: the load whose misses set the figure). Each run's window
requests are split by cause (`sim.steady.miss_causes`): TTFT, TBT already in the scheduler's
token times, TBT only as the client receives the tokens (after the simulated front end), both,
or unserved. A case whose misses are TTFT is prefill-bound; one whose misses are client-only
TBT is bound by token delivery, which the scheduler does not see.

    python -m benchmark.capacity.misses [--cases azure-code-qwen3-14b-tp2 ...] [--over 1.05]

Writes ``benchmark/results/capacity/misses.{json,md}``. Capacities are Poisson QPS on the whole
cluster.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from benchmark.stamp import write_result
from sglang_duet.sim import build_arrivals, load_trace
from sglang_duet.sim.engine import Simulation
from sglang_duet.sim.steady import miss_causes, steady_state

from .search import Cluster, Setting
from .seeds import case_arguments, load_cases
from .sweep import _pool_map

__all__ = ["main", "run_point"]

CAUSES = ("ttft", "tbt_server", "tbt_client", "both", "unserved")


def run_point(cl: Cluster, s: Setting, qps: float, requests: int) -> dict[str, Any]:
    """One run: its attainment, whether it keeps up, and its window's miss causes."""
    cfg = cl.sim_config(s, round(qps, 4), requests)
    res = Simulation(cfg, build_arrivals(load_trace(cl.trace), cfg.qps, requests, cl.seed),
                     s.policy).run()
    tbt, ttft = cfg.tbt_slo_ms / 1e3, cfg.ttft_slo_ms / 1e3
    st = steady_state(res, tbt, ttft)
    return {"qps": cfg.qps, "attainment": st["attainment"], "keeps_up": st["keeps_up"],
            "causes": miss_causes(res, tbt, ttft)}


def _task(args: tuple[str, str, Cluster, Setting, float, int]) -> tuple[str, str, dict]:
    case, which, cl, s, qps, n = args
    return case, which, run_point(cl, s, qps, n)


def _markdown(out: dict[str, Any], over: float) -> str:
    lines = ["# What limits capacity: why requests miss", "",
             "Written by `python -m benchmark.capacity.misses`. Each policy at its best setting "
             f"(the sweep's), at its capacity and at {over:g}x it; the window's requests by "
             "cause (`sim.steady.miss_causes`), as shares of the window. TBT server: the "
             "scheduler's own gaps miss; TBT client: only the delivered ones do (the simulated "
             "front end's intake and streaming).", "",
             "| case | policy | QPS | attainment | keeps up | TTFT | TBT server | TBT client "
             "| both | unserved |", "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: "
             "| ---: |"]
    for case, pols in out.items():
        for pol, row in pols.items():
            for p in row["points"]:
                c, w = p["causes"], p["causes"]["window"]
                shares = " | ".join(f"{100 * c[k] / w:.1f}%" for k in CAUSES)
                lines.append(f"| {case} | {pol} ({row['setting']}) | {p['qps']:g} | "
                             f"{p['attainment']:.3f} | {'yes' if p['keeps_up'] else 'no'} | "
                             f"{shares} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmark.capacity.misses",
                                 description=(__doc__ or "").split("\n")[0])
    case_arguments(ap)
    ap.add_argument("--over", type=float, default=1.05,
                    help="the second load, as a multiple of each policy's capacity (> 1)")
    args = ap.parse_args(argv)
    if not args.over > 1.0:
        ap.error("--over must be > 1")
    sweeps = load_cases(args.cases, args.out)
    if sweeps is None:
        return 2
    t0 = time.perf_counter()
    tasks, out = [], {}
    for case, (cl, n, pols) in sweeps.items():
        out[case] = {p: {"setting": s.label(), "capacity_qps": cap, "requests": n, "points": []}
                     for p, (s, cap) in pols.items()}
        for p, (s, cap) in pols.items():
            tasks += [(case, p, cl, s, cap, n), (case, p, cl, s, cap * args.over, n)]

    def done(item: tuple[str, str, dict]) -> None:
        case, pol, point = item
        out[case][pol]["points"].append(point)
        print(f"  {case:<28} {pol:<14} {point['qps']:<8g} {point['causes']}", file=sys.stderr)

    _pool_map(_task, tasks, args.jobs, done)
    for pols in out.values():
        for row in pols.values():
            row["points"].sort(key=lambda p: p["qps"])
    payload = {"benchmark": "capacity.misses", "over": args.over, "cases": out,
               "wall_s": round(time.perf_counter() - t0, 1)}
    write_result(os.path.join(args.out, "misses.json"), payload)
    with open(os.path.join(args.out, "misses.md"), "w") as f:
        f.write(_markdown(out, args.over))
    print(_markdown(out, args.over))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
