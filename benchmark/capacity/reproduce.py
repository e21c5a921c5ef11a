"""``python -m benchmark.capacity.reproduce``: do the committed sweeps still hold for this code?

A sweep (`sweep.py`) is long: mooncake with Qwen3-14B takes about half an hour. A change to the
simulator or the policy that should not move any plan (a speed-up, a refactor, a diagnosis hook)
is checked instead by re-running every committed sweep's best-setting point at its capacity, for
every policy, with this code, and comparing the whole stored record (the steady-state window's
statistics and completions) with the one the sweep kept. Every point equal means every figure
in the tables is this code's; any point different means the sweeps must be rerun.

    python -m benchmark.capacity.reproduce [--cases CASE ...] [--jobs 2]

Writes ``benchmark/results/capacity/reproduce.json`` (stamped) and exits 1 when a point differs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from benchmark.stamp import write_result

from .search import CACHE, Cluster, Setting, evaluate
from .seeds import case_arguments, sweep_names
from .sweep import _pool_map

__all__ = ["main", "reproduces"]


def reproduces(cl: Cluster, policy: str, best: dict[str, Any], requests: int) -> int | None:
    """The run length (``requests`` or twice it: where the 2x run set the figure) whose point at
    ``best``'s capacity equals the stored one, or None when neither does (every statistic the
    stored point has: one added since, like the fairness columns, is not a difference)."""
    s = Setting(policy, tuple(sorted(best["setting"].items())))
    stored = best["at_capacity"]
    for n in (requests, 2 * requests):
        got = evaluate(cl, s, best["capacity_qps"], n).metrics
        same = all(got["steady"].get(k) == v for k, v in stored["steady"].items())
        if same and got["completed"] == stored["completed"]:
            return n
    return None


def _task(args: tuple[str, str, Cluster, dict[str, Any], int]) -> tuple[str, str, dict]:
    case, policy, cl, best, n = args
    got = reproduces(cl, policy, best, n)
    return case, policy, {"capacity_qps": best["capacity_qps"], "equal": got is not None,
                          "requests": got}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmark.capacity.reproduce",
                                 description=(__doc__ or "").split("\n")[0])
    case_arguments(ap)
    args = ap.parse_args(argv)
    CACHE.dir = None  # recompute: a cached point would only repeat the stored one
    t0 = time.perf_counter()
    tasks, out = [], {}
    for case in args.cases or sweep_names(args.out):
        with open(os.path.join(args.out, f"{case}.json")) as f:
            sweep = json.load(f)
        cl, n = Cluster(**sweep["config"]["cluster"]), int(sweep["config"]["requests"])
        out[case] = {"stamp": sweep["stamp"]["commit"], "policies": {}}
        tasks += [(case, p, cl, r["best"], n) for p, r in sweep["policies"].items()]

    def done(item: tuple[str, str, dict]) -> None:
        case, policy, row = item
        out[case]["policies"][policy] = row
        print(f"  {case:<28} {policy:<14} {'equal' if row['equal'] else 'DIFFERENT'}",
              file=sys.stderr)

    _pool_map(_task, tasks, args.jobs, done)
    rows = [r for c in out.values() for r in c["policies"].values()]
    differ = sum(not r["equal"] for r in rows)
    write_result(os.path.join(args.out, "reproduce.json"),
                 {"benchmark": "capacity.reproduce", "points": len(rows), "different": differ,
                  "cases": out, "wall_s": round(time.perf_counter() - t0, 1)})
    print(f"{len(rows) - differ} of {len(rows)} committed best points reproduced exactly")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
