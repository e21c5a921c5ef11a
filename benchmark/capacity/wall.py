"""``python -m benchmark.capacity.wall``: near a capacity, how often does each setting pass?

A capacity is one seed's highest passing QPS, and near a hard limit the pass rule flips from one
QPS (or one seed) to the next: on azure-conv the front end caps every SGLang-based system at
about 21 req/s per server, and whether TTFT rises by more than 1 s across the window is a
random walk of its queue. Two settings whose capacities differ by one search step may then be
one seed's luck, which `seeds.py` shows per seed. This shows it per QPS: each setting (a
policy's best from the committed sweep, or that with knobs changed) at each QPS of a grid over
several seeds (each a new request sample and arrival draw, shared by every setting), with the
share that pass the sweep's rule, and the QPS where half of them pass (linear between grid
points; the last passing QPS's bound when the grid does not bracket it).

    python -m benchmark.capacity.wall --case azure-conv-qwen3-8b-tp1 \
        --settings duet duet:router=round-robin sglang-pdmux --qps 39.5 40.5 41.5 42.5

A setting is ``POLICY`` (its best setting in the sweep) or ``POLICY:FIELD=VALUE[,...]`` (that,
with SimConfig fields changed). Writes ``wall/<case>.{json,md}`` under the results folder.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from typing import Any

from benchmark.stamp import write_result

from .__main__ import _overrides
from .search import CACHE, Cluster, Setting, evaluate, passes
from .seeds import DEFAULT_OUT
from .sweep import _pool_map

__all__ = ["half_pass_qps", "main", "parse_setting"]


# SimConfig fields the case or the grid sets: a setting may not change them
FIXED = ("trace", "policy", "model", "tp", "gpus", "hardware", "qps", "num_requests", "seed",
         "tbt_slo_ms", "ttft_slo_ms")


def parse_setting(spec: str, sweep: dict[str, Any]) -> Setting:
    """``POLICY`` or ``POLICY:FIELD=VALUE[,...]`` over the policy's best setting in ``sweep``."""
    pol, _, rest = spec.partition(":")
    if pol not in sweep["policies"]:
        raise ValueError(f"{spec!r}: no policy {pol!r} in the sweep")
    s = Setting(pol, tuple(sorted(sweep["policies"][pol]["best"]["setting"].items())))
    try:
        knobs = _overrides(rest.split(",")) if rest else {}
    except ValueError as e:
        raise ValueError(f"--settings {spec!r}: {str(e).partition(': ')[2]}") from None
    for name, value in knobs.items():
        if name in FIXED:
            raise ValueError(f"--settings {spec!r}: {name} is set by the case or the grid")
        s = s.with_knob(name, value)
    return s


def half_pass_qps(qps: list[float], share: list[float]) -> float | None:
    """The QPS where the pass share crosses 1/2 going up the grid (linear between the two grid
    points around the last crossing); None when no grid point has half passing, and the top
    grid point (a lower bound: see `bracketed`) when every one above the first has."""
    last = max((i for i, s in enumerate(share) if s >= 0.5), default=None)
    if last is None:
        return None
    if last + 1 == len(qps):
        return qps[last]
    lo, hi = share[last], share[last + 1]
    return round(qps[last] + (qps[last + 1] - qps[last]) * (lo - 0.5) / (lo - hi), 4)


def _task(args: tuple[str, Cluster, Setting, float, int]) -> tuple[str, float, int, bool, float]:
    spec, cl, setting, qps, requests = args
    p = evaluate(cl, setting, qps, requests)
    return spec, qps, cl.seed, passes(p, cl.target), float(p.metrics["steady"]["ttft_rise_s"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmark.capacity.wall",
                                 description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--case", required=True, help="a sweep name (<trace>-<model>-tp<tp>)")
    ap.add_argument("--settings", nargs="+", required=True)
    ap.add_argument("--qps", nargs="+", type=float, required=True)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4, 5])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    path = os.path.join(args.out, f"{args.case}.json")
    try:
        with open(path) as f:
            sweep = json.load(f)
        settings = {spec: parse_setting(spec, sweep) for spec in args.settings}
    except (OSError, ValueError) as e:
        print(f"benchmark.capacity.wall: error: {e}", file=sys.stderr)
        return 2
    cl, n = Cluster(**sweep["config"]["cluster"]), int(sweep["config"]["requests"])
    qps = sorted(args.qps)
    t0 = time.perf_counter()
    CACHE.open(args.out)
    tasks = [(spec, replace(cl, seed=seed), s, q, n) for spec, s in settings.items()
             for q in qps for seed in args.seeds]
    got: dict[tuple[str, float, int], tuple[bool, float]] = {}
    _pool_map(_task, tasks, args.jobs, lambda r: got.__setitem__(r[:3], r[3:]))
    rows = {}
    for spec, s in settings.items():
        share = [sum(got[spec, q, sd][0] for sd in args.seeds) / len(args.seeds) for q in qps]
        rows[spec] = {"setting": s.label(), "policy": s.policy, "pass_share": share,
                      "passes": {str(q): [got[spec, q, sd][0] for sd in args.seeds] for q in qps},
                      "ttft_rise_s": {str(q): [got[spec, q, sd][1] for sd in args.seeds]
                                      for q in qps},
                      "half_pass_qps": half_pass_qps(qps, share),
                      "bracketed": share[-1] < 0.5}  # else half pass at the top QPS, or more
    payload = {"benchmark": "capacity.wall", "case": args.case, "requests": n, "qps": qps,
               "seeds": args.seeds, "settings": rows, "wall_s": round(time.perf_counter() - t0, 1)}
    folder = os.path.join(args.out, "wall")
    os.makedirs(folder, exist_ok=True)
    write_result(os.path.join(folder, f"{args.case}.json"), payload)
    md = _markdown(payload)
    with open(os.path.join(folder, f"{args.case}.md"), "w") as f:
        f.write(md)
    print(md)
    return 0


def _markdown(p: dict[str, Any]) -> str:
    head = "| setting | " + " | ".join(f"{q:g}" for q in p["qps"]) + " | half pass at |"
    lines = [f"# Pass shares near the wall: {p['case']}", "",
             "Written by `python -m benchmark.capacity.wall` (see its docstring). Share of "
             f"seeds {p['seeds']} passing the sweep's rule at each Poisson QPS, "
             f"{p['requests']} requests per run.", "", head,
             "| --- | " + " | ".join("---:" for _ in p["qps"]) + " | ---: |"]
    for spec, r in p["settings"].items():
        half = "-" if r["half_pass_qps"] is None else f"{r['half_pass_qps']:g}"
        half = half if r["bracketed"] or half == "-" else f">= {half}"
        lines.append(f"| {spec} ({r['setting']}) | "
                     + " | ".join(f"{s:.2f}" for s in r["pass_share"]) + f" | {half} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
