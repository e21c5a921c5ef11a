"""Router comparison in the simulator: capacity per router, and the dispatch decision's cost.

    python -m benchmark.router [--setups qwen3-8b-8xh100-tp1 ...] [--traces mooncake ...]
        [--routers duet total-tokens ...] [--num-requests 400] [--skip-cost]

Writes ``benchmark/results/router/capacity-<setup>.json`` (one per setup: per trace and router,
the capacity and every probe run), ``dispatch_cost.json`` and the markdown summary
``README.md`` (rebuilt from every capacity JSON present).
"""

from __future__ import annotations

import argparse
import os
import time

from benchmark.router.capacity import SETUPS, capacity
from benchmark.router.dispatch_cost import measure
from benchmark.router.report import write_markdown
from benchmark.stamp import write_result
from sglang_duet.router import ROUTERS
from sglang_duet.sim import SimConfig, load_trace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "benchmark", "results", "router")
TRACES = ("azure-conv", "azure-code", "mooncake")
# first probe, requests/s per replica (the search doubles or halves from there)
START_PER_REPLICA = {"azure-conv": 1.0, "azure-code": 0.5, "mooncake": 0.25}


def run_setup(setup, traces, routers, n: int, seed: int) -> dict:
    out: dict = {"setup": setup.__dict__, "num_requests": n, "seed": seed, "traces": {}}
    for name in traces:
        trace = load_trace(name)
        start = START_PER_REPLICA.get(name, 0.5) * (setup.gpus // setup.tp)
        rows = {}
        for router in routers:
            base = SimConfig(trace=name, policy="duet", model=setup.model,
                             hardware=setup.hardware, gpus=setup.gpus, tp=setup.tp, seed=seed,
                             router=router)
            t0 = time.perf_counter()
            qps, probes = capacity(base, trace, n, start)
            rows[router] = {"capacity_qps": round(qps, 4), "probes": probes,
                            "search_wall_s": round(time.perf_counter() - t0, 1)}
            print(f"{setup.name} {name} {router}: {qps:.3f} req/s "
                  f"({len(probes)} runs, {rows[router]['search_wall_s']} s)", flush=True)
        out["traces"][name] = rows
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--setups", nargs="+", default=[s.name for s in SETUPS],
                    choices=[s.name for s in SETUPS])
    ap.add_argument("--traces", nargs="+", default=list(TRACES))
    ap.add_argument("--routers", nargs="+", default=list(ROUTERS), choices=list(ROUTERS))
    ap.add_argument("--num-requests", type=int, default=400)
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
        by_name = {s.name: s for s in SETUPS}
        for name in args.setups:
            payload = run_setup(by_name[name], args.traces, args.routers, args.num_requests,
                                args.seed)
            write_result(os.path.join(args.out, f"capacity-{name}.json"), payload, argv=argv)
    write_markdown(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
