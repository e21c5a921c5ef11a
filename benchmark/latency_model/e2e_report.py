"""The simulator end to end against published serving runs (issue #22, item 5), before and after
the end-to-end costs.

    python -m benchmark.latency_model.e2e_report [--kfold 5] [--cases ID,ID] [--quick]

Reads ``benchmark/latency_model/e2e/reference.csv`` (its README says where every row comes
from), simulates every row:

* ``before``: the simulator without the new costs (``frontend``, ``prefix_cache``,
  ``running_caps``, ``sglang_schedule`` off) on the calibration it had before the H100 prefill
  rows (``e2e/calibration-before.json``);
* ``after``: every cost on, the refitted ``published-h100`` calibration, and each system's
  front-end cost fitted on the other folds' rows (`e2e_fit`, k-fold: held out);
* ``without X``: ``after`` with one cost off at a time (front-end cost fitted on all rows).

and gives simulated / published per metric. Targets: request throughput and TTFT within
0.8-1.25x, TPOT and ITL within 0.85-1.15x (the mean where published, else the median). The
paper's own checks (`e2e_checks`) run before and after. Writes
``python/sglang_duet/sim/frontend_costs.json`` (the all-rows fit) and
``benchmark/results/latency_model/e2e.{json,md}``.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from benchmark.latency_model.e2e_cases import METRICS, read_cases, run_case
from benchmark.latency_model.e2e_checks import paper_checks
from benchmark.latency_model.e2e_fit import (
    POST_GRID,
    SERIAL_GRID,
    GridRuns,
    comparable,
    kfold,
    write_costs,
)
from benchmark.latency_model.e2e_md import markdown
from benchmark.stamp import ROOT, write_result
from sglang_duet.sim.frontend import COSTS_PATH

CSV = ROOT / "benchmark" / "latency_model" / "e2e" / "reference.csv"
BEFORE_CAL = ROOT / "benchmark" / "latency_model" / "e2e" / "calibration-before.json"
OUT = ROOT / "benchmark" / "results" / "latency_model" / "e2e"
COSTS = ("frontend", "prefix_cache", "running_caps", "sglang_schedule")
BEFORE = {**dict.fromkeys(COSTS, False), "calibration": str(BEFORE_CAL)}
TARGETS = {"throughput": (0.8, 1.25), "ttft": (0.8, 1.25), "tpot": (0.85, 1.15),
           "itl": (0.85, 1.15)}


def target_of(metric: str) -> tuple[float, float]:
    return TARGETS[metric.split("_")[0]]


def ratios(case, sim: dict[str, float | None]) -> dict[str, float | None]:
    return {m: (sim[m] / case.published[m] if sim.get(m) else None) for m in comparable(case)}


def headline_metrics(case) -> list[str]:
    """The metrics the targets name: throughput, TTFT, TPOT, ITL (mean, else median)."""
    out = []
    comp = comparable(case)
    for kind in ("throughput_rps", "ttft", "tpot", "itl"):
        if kind in comp:
            out.append(kind)
            continue
        for stat in ("mean", "median"):
            if f"{kind}_{stat}_ms" in comp:
                out.append(f"{kind}_{stat}_ms")
                break
    return out


def summary(cases, after: dict[str, dict]) -> dict[str, object]:
    """Per headline metric kind: rows, rows within target, geometric mean ratio, misses."""
    out: dict[str, object] = {}
    for kind in TARGETS:
        lo, hi = TARGETS[kind]
        vals = [(c.id, m, after[c.id][m] / c.published[m]) for c in cases
                for m in headline_metrics(c) if m.startswith(kind) and after[c.id].get(m)]
        within = [v for v in vals if lo <= v[2] <= hi]
        gm = math.exp(sum(math.log(v[2]) for v in vals) / len(vals)) if vals else None
        out[kind] = {"target": [lo, hi], "n": len(vals), "within": len(within),
                     "geomean_ratio": gm,
                     "misses": [{"id": i, "metric": m, "ratio": r} for i, m, r in vals
                                if not lo <= r <= hi]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", default=str(CSV))
    ap.add_argument("--kfold", type=int, default=5)
    ap.add_argument("--cases", default="", help="comma-separated row ids (default: all)")
    ap.add_argument("--quick", action="store_true",
                    help="a coarse grid and small checks (pipeline tests)")
    ap.add_argument("--out", default=str(OUT), help="output path without extension")
    ap.add_argument("--costs-out", default=str(COSTS_PATH),
                    help="where the fitted front-end costs go ('' = nowhere)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    cases = read_cases(args.csv)
    if args.cases:
        keep = set(args.cases.split(","))
        cases = [c for c in cases if c.id in keep]
        if not cases:
            raise SystemExit(f"no case among {sorted(keep)}")
    log = print
    log(f"{len(cases)} cases; before ...")
    before = {c.id: run_case(c, **BEFORE) for c in cases}
    serial = SERIAL_GRID[::3] if args.quick else SERIAL_GRID
    post = POST_GRID[::7] if args.quick else POST_GRID
    runs = GridRuns(cases, None, serial, post, log)
    after, fitted = kfold(runs, args.kfold)
    provenance = {
        "note": "Front-end cost per serving system (sim/frontend.py), fitted by "
                "benchmark.latency_model.e2e_report to the published runs of "
                "benchmark/latency_model/e2e/reference.csv (least squared log error of "
                "throughput, TTFT, TPOT, ITL over the system's rows; grid search)",
        "rows": {s: [c.id for c in cases if c.flavor == s] for s in sorted(fitted)},
        "grid_s": {"serial": list(serial), "per_token_latency": [list(x) for x in post]},
    }
    costs_path = args.costs_out or None
    if costs_path:
        write_costs(costs_path, fitted, provenance)
    log("ablations ...")
    ablations = {}
    for cost in (*COSTS, "calibration"):
        off = {"calibration": str(BEFORE_CAL)} if cost == "calibration" else {cost: False}
        if costs_path:
            off["frontend_costs"] = costs_path
        ablations[cost] = {c.id: run_case(c, **off) for c in cases}
    log("paper checks ...")
    checks = {"before": paper_checks(BEFORE, args.quick), "after": paper_checks({}, args.quick)}
    rows = []
    for c in cases:
        rows.append({
            "id": c.id, "engine": c.engine, "model": c.model, "gpu": c.gpu, "tp": c.tp,
            "gpus": c.gpus, "workload": c.workload, "published": c.published,
            "comparable": comparable(c), "headline": headline_metrics(c),
            "before": before[c.id], "after": after[c.id],
            "ratio_before": ratios(c, before[c.id]), "ratio_after": ratios(c, after[c.id]),
            "ratio_without": {k: ratios(c, v[c.id]) for k, v in ablations.items()},
        })
    res = {
        "csv": str(Path(args.csv).resolve().relative_to(ROOT)) if Path(args.csv).resolve()
        .is_relative_to(ROOT) else args.csv,
        "n_cases": len(cases), "kfold": args.kfold, "quick": args.quick,
        "targets": TARGETS, "metrics": list(METRICS), "frontend_fit_all_rows": fitted,
        "frontend_provenance": provenance, "rows": rows,
        "summary_before": summary(cases, before), "summary_after": summary(cases, after),
        "checks": checks, "wall_s": round(time.perf_counter() - t0, 1),
    }
    write_result(f"{args.out}.json", res)
    with open(f"{args.out}.md", "w", encoding="utf-8") as f:
        f.write(markdown(res))
    for kind, s in res["summary_after"].items():
        log(f"{kind:>10}: {s['within']}/{s['n']} within {s['target']} after "
            f"(before {res['summary_before'][kind]['within']}/{s['n']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
