"""Router comparison in the simulator: capacity per router, and the dispatch decision's cost.

    python -m benchmark.router [--setups qwen3-8b-8xh100-tp1 ...] [--traces mooncake ...]
        [--routers duet total-tokens ...] [--no-baselines [--keep-baselines]] [--skip-cost]

Writes ``benchmark/results/router/capacity-<setup>.json`` (one per setup: per trace and router,
the steady-state capacity and every probe run; the best-tuned alternatives), ``dispatch_cost.json``
and the markdown summary ``README.md`` (rebuilt from every capacity JSON present).
"""

from __future__ import annotations

import argparse
import json
import os
import time

from benchmark.capacity.search import CACHE
from benchmark.router.capacity import BASELINES, SETUPS, baseline_capacity, router_capacity
from benchmark.router.dispatch_cost import measure
from benchmark.router.report import write_markdown
from benchmark.stamp import write_result
from sglang_duet.router import ROUTERS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "benchmark", "results", "router")
TRACES = ("azure-conv", "azure-code", "mooncake")


def run_setup(setup, traces, routers, seed: int, baselines: bool) -> dict:
    out: dict = {"setup": setup.__dict__, "seed": seed, "traces": {}, "baselines": {}}
    for name in traces:
        rows = {}
        for router in routers:
            t0 = time.perf_counter()
            row = router_capacity(setup, name, router, seed, length_check=router == "duet")
            row["search_wall_s"] = round(time.perf_counter() - t0, 1)
            rows[router] = row
            print(f"{setup.name} {name} {router}: {row['capacity_qps']:.3f} req/s "
                  f"({len(row['probes'])} runs, {row['search_wall_s']} s)", flush=True)
        out["traces"][name] = rows
        if baselines:
            out["baselines"][name] = {}
            for pol in BASELINES:
                r = baseline_capacity(setup, name, pol, seed)
                out["baselines"][name][pol] = r
                print(f"{setup.name} {name} {pol} (best-tuned: {r['setting']}): "
                      f"{r['capacity_qps']:.3f} req/s", flush=True)
    return out


def _kept_baselines(path: str) -> dict | None:
    """The alternatives of an earlier run of the setup and that run's commit, or None."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        old = json.load(f)
    if not old.get("baselines"):
        return None
    return {"baselines": old["baselines"],
            "baselines_from": old.get("baselines_from") or old["stamp"]["commit"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--setups", nargs="+", default=[s.name for s in SETUPS],
                    choices=[s.name for s in SETUPS])
    ap.add_argument("--traces", nargs="+", default=list(TRACES))
    ap.add_argument("--routers", nargs="+", default=list(ROUTERS), choices=list(ROUTERS))
    ap.add_argument("--no-baselines", action="store_true",
                    help="routers only (no best-tuned chunked prefill / Dynamo xPyD)")
    ap.add_argument("--keep-baselines", action="store_true",
                    help="with --no-baselines: carry each setup's alternatives from its existing "
                         "JSON (stamped with that JSON's commit), for a change that touched only "
                         "the duet policy or the routers")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-cost", action="store_true")
    ap.add_argument("--skip-capacity", action="store_true")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args(argv)

    if not args.skip_cost:
        cost = {"results": [measure(r) for r in args.routers], "target_median_us": 50.0}
        write_result(os.path.join(args.out, "dispatch_cost.json"), cost, argv=argv)
        for row in cost["results"]:
            print(f"dispatch {row['router']}: decision {row['decision']}, after report "
                  f"{row['after_report']}, stream {row['stream']}")
    if not args.skip_capacity:
        CACHE.open(args.out)
        by_name = {s.name: s for s in SETUPS}
        for name in args.setups:
            path = os.path.join(args.out, f"capacity-{name}.json")
            kept = _kept_baselines(path) if args.keep_baselines and args.no_baselines else None
            payload = run_setup(by_name[name], args.traces, args.routers, args.seed,
                                not args.no_baselines)
            if kept:
                payload.update(kept)
            write_result(path, payload, argv=argv)
    write_markdown(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
