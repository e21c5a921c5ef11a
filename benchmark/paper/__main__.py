"""``python -m benchmark.paper [--out DIR] [--quick]``: run every experiment, write the figures,
``results.md`` and ``results.json``."""

from __future__ import annotations

import argparse
import os
import time

from benchmark.stamp import write_result

from .experiments import run_e2e, run_obs3
from .report import write_figures, write_markdown

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(ROOT, "benchmark", "results", "paper")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="output folder")
    ap.add_argument("--quick", action="store_true", help="tiny workloads (smoke test)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.perf_counter()
    print("Observation 3 (Agg-vLLM vs Disagg 1P1D)", flush=True)
    obs3 = run_obs3(args.quick)
    print("End-to-end comparisons", flush=True)
    e2e = run_e2e(args.quick)
    data = {"obs3": obs3, "e2e": e2e, "quick": args.quick,
            "wall_s": round(time.perf_counter() - t0, 1)}
    write_result(os.path.join(args.out, "results.json"), data)
    figs = write_figures(data, args.out)
    md = write_markdown(data, args.out, figs)
    print(f"wrote {md} and {len(figs)} figures in {data['wall_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
