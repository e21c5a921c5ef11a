"""``python -m benchmark.capacity.seeds``: is a capacity ratio real, or one seed's luck?

Every sweep (`sweep.py`) runs one sample of the trace and one draw of Poisson arrivals (seed
0), and its search stops at a 2.5% bracket. Where duet and the best-tuned alternative land one
or two search steps apart, the sign of their ratio may be the seed's. This reruns, for each named
case, duet at its best setting and the best-tuned alternative at *its* best setting (both read
from the committed sweep JSON, so no knob is retuned per seed) on further seeds, each seed being
a new request sample and a new arrival draw shared by both policies, and reports per seed the
two capacities (the sweep's rule and run length; `search.find_capacity` at the sweep's fine
tolerance; every seed at the sweep's run length, so seed 0 is the shorter run's figure where a
2x run set the sweep's) and their ratio, plus the mean, the lowest and the highest ratio over
every seed, the sweep's own seed 0 included.

    python -m benchmark.capacity.seeds [--cases azure-conv-qwen3-8b-tp1 ...] [--seeds 1 2 3]

Writes ``benchmark/results/capacity/seeds.{json,md}``. Points are cached with the sweeps'
(``tmp/`` under the results folder). Capacities are Poisson QPS on the whole cluster.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

from benchmark.stamp import write_result

from .report import alternatives
from .search import CACHE, Cluster, Setting, find_capacity
from .sweep import FINE_TOL, _pool_map

__all__ = ["case_arguments", "case_settings", "load_cases", "main", "ratio_summary", "sweep_names"]

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "results", "capacity")
START_SHARE = 0.93  # the search starts a little under seed 0's capacity (fewest runs)


def sweep_names(folder: str) -> list[str]:
    """Every sweep in ``folder`` (``<trace>-<model>-tp<tp>.json``), sorted."""
    paths = glob.glob(os.path.join(folder, "*-tp[0-9]*.json"))
    return sorted(os.path.basename(p)[:-5] for p in paths)


def case_settings(sweep: dict[str, Any]) -> tuple[Cluster, int, dict[str, tuple[Setting, float]]]:
    """(the sweep's cluster, its requests per run, {name: (best setting, seed-0 capacity at
    the sweep's run length)}) for duet and the sweep's best-tuned alternative (a reference row,
    ``<policy>+hrrn``, by that name: `report.alternatives`)."""
    cfg = sweep["config"]
    cl = Cluster(**cfg["cluster"])
    alt = sweep["ratios"]["best_alternative"]
    rows = {"duet": ("duet", sweep["policies"]["duet"]["best"]),
            **alternatives(sweep["policies"])}
    out: dict[str, tuple[Setting, float]] = {}
    for name in ("duet", alt):
        pol, best = rows[name]
        knobs = tuple(sorted((k, v) for k, v in best["setting"].items()))
        # the sweep's run length, as every other seed: where its 2x run set the figure, the
        # shorter run's capacity is kept as short_run_qps
        out[name] = (Setting(pol, knobs), float(best.get("short_run_qps", best["capacity_qps"])))
    return cl, int(cfg["requests"]), out


def case_arguments(ap: argparse.ArgumentParser) -> None:
    """``--cases``, ``--jobs`` and ``--out``: what every per-case study takes (`load_cases`)."""
    ap.add_argument("--cases", nargs="+", default=None,
                    help="sweep names (<trace>-<model>-tp<tp>) in the results folder; default: "
                         "every sweep there")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=DEFAULT_OUT)


def load_cases(names: list[str] | None, folder: str
               ) -> dict[str, tuple[Cluster, int, dict[str, tuple[Setting, float]]]] | None:
    """`case_settings` of each named sweep in ``folder`` (default: every sweep there), or None
    after saying on stderr which is missing or unusable (the callers' exit 2)."""
    names = names or sweep_names(folder)
    if not names:
        print(f"--cases: no sweep in {folder}", file=sys.stderr)
        return None
    out = {}
    for case in names:
        path = os.path.join(folder, f"{case}.json")
        try:
            with open(path) as f:
                out[case] = case_settings(json.load(f))
        except (OSError, KeyError, ValueError) as e:
            print(f"--cases: no usable sweep {path}: {e}", file=sys.stderr)
            return None
    return out


def ratio_summary(ratios: list[float]) -> dict[str, Any]:
    """Mean, lowest and highest duet / alternative ratio, and on how many seeds duet is below."""
    return {"mean": round(statistics.fmean(ratios), 4), "min": round(min(ratios), 4),
            "max": round(max(ratios), 4), "seeds": len(ratios),
            "below": sum(r < 1.0 for r in ratios)}


def _task(args: tuple[str, Cluster, int, Setting, float, str]
          ) -> tuple[str, str, int, float, int]:
    case, cl, requests, setting, start, name = args
    cap, pts = find_capacity(cl, setting, requests, start * START_SHARE, FINE_TOL)
    return case, name, cl.seed, cap, len(pts)


def _markdown(cases: dict[str, Any], seeds: list[int]) -> str:
    lines = ["# Capacity over seeds", "",
             "Written by `python -m benchmark.capacity.seeds` (see its docstring). Each seed is a "
             "new request sample and arrival draw, shared by both policies; each policy runs at "
             "its best setting from the committed sweep (seed 0). Req/s on 2x H100, simulated.",
             "", "| case | alternative (setting) | " +
             " | ".join(f"seed {s}" for s in [0, *seeds]) + " | mean ratio | min | max | "
             "duet below |", "| --- | --- | " + " | ".join("---:" for _ in range(len(seeds) + 1))
             + " | ---: | ---: | ---: | ---: |"]
    for case, c in cases.items():
        cells = [f"{r['duet']:.3g} / {r['alternative']:.3g} ({r['ratio']:.3f})"
                 for r in c["per_seed"]]
        s = c["summary"]
        lines.append(f"| {case} | {c['alternative']} ({c['alternative_setting']}) | "
                     + " | ".join(cells) + f" | {s['mean']:.3f} | {s['min']:.3f} | "
                     f"{s['max']:.3f} | {s['below']} of {s['seeds']} |")
    lines.append("")
    lines.append("Cells: duet / alternative (their ratio).")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmark.capacity.seeds",
                                 description=(__doc__ or "").split("\n")[0])
    case_arguments(ap)
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    args = ap.parse_args(argv)
    if 0 in args.seeds:
        ap.error("--seeds: seed 0 is the sweep's own; give others")
    sweeps = load_cases(args.cases, args.out)
    if sweeps is None:
        return 2
    t0 = time.perf_counter()
    CACHE.open(args.out)
    tasks = []
    for case, (cl, n, pols) in sweeps.items():
        for seed in args.seeds:
            for name, (setting, cap0) in pols.items():
                tasks.append((case, replace(cl, seed=seed), n, setting, cap0, name))
    caps: dict[tuple[str, str, int], float] = {}

    def done(item: tuple[str, str, int, float, int]) -> None:
        case, pol, seed, cap, runs = item
        caps[(case, pol, seed)] = cap
        print(f"  {case:<28} seed {seed} {pol:<14} {cap:<8g} ({runs} runs)", file=sys.stderr)

    _pool_map(_task, tasks, args.jobs, done)
    out: dict[str, Any] = {}
    for case, (_cl, n, pols) in sweeps.items():
        alt = next(p for p in pols if p != "duet")
        rows = []
        for seed in [0, *args.seeds]:
            d = pols["duet"][1] if seed == 0 else caps[(case, "duet", seed)]
            a = pols[alt][1] if seed == 0 else caps[(case, alt, seed)]
            rows.append({"seed": seed, "duet": d, "alternative": a,
                         "ratio": round(d / a, 4) if a > 0 else None})
        out[case] = {"requests": n, "alternative": alt, "alternative_setting": pols[alt][0].label(),
                     "duet_setting": pols["duet"][0].label(), "per_seed": rows,
                     "summary": ratio_summary([r["ratio"] for r in rows if r["ratio"]])}
    payload = {"benchmark": "capacity.seeds", "seeds": [0, *args.seeds], "rel_tol": FINE_TOL,
               "cases": out, "wall_s": round(time.perf_counter() - t0, 1)}
    write_result(os.path.join(args.out, "seeds.json"), payload)
    with open(os.path.join(args.out, "seeds.md"), "w") as f:
        f.write(_markdown(out, args.seeds))
    print(_markdown(out, args.seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
