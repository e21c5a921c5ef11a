"""``python -m benchmark.capacity --trace T [--policies ...] [--model --tp --gpus] [--requests N]``:
SLO attainment vs QPS per policy on the simulator and each policy's capacity, written to
``benchmark/results/capacity/<trace>-<model>-tp<tp>.{json,png,md}`` plus ``README.md`` there
(every sweep's table). ``--trace all`` sweeps the three named traces."""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from dataclasses import fields

from benchmark.stamp import write_result
from sglang_duet.sim import SimConfig, policy_names

from . import report
from .sweep import DEFAULT_GRIDS, DEFAULT_REQUESTS, CapacityConfig, run_sweep

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(ROOT, "benchmark", "results", "capacity")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmark.capacity",
                                 description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--trace", default="azure-code",
                    help=f"{', '.join(DEFAULT_GRIDS)}, a trace path, or all")
    ap.add_argument("--policies", default="all",
                    help=f"comma-separated ({', '.join(policy_names())}) or all")
    ap.add_argument("--model", default="qwen3-8b")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--hardware", default="h100-sxm")
    ap.add_argument("--requests", type=int, default=None,
                    help=f"requests per point (default per trace: {DEFAULT_REQUESTS})")
    ap.add_argument("--qps", default=None, help="comma-separated QPS grid (default per trace)")
    ap.add_argument("--bisect-steps", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tbt-slo-ms", type=float, default=100.0)
    ap.add_argument("--ttft-slo-ms", type=float, default=10000.0)
    ap.add_argument("--target", type=float, default=0.9, help="attainment a capacity needs")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="override a simulator setting (a SimConfig field, e.g. "
                         "kv_xfer_gbps=450 or max_lookahead=8); repeatable")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--out", default=DEFAULT_OUT, help="output folder")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    return ap


def _config(args: argparse.Namespace, trace: str) -> CapacityConfig:
    names = policy_names()
    pols = names if args.policies == "all" else [p.strip() for p in args.policies.split(",")]
    bad = [p for p in pols if p not in names]
    if bad:
        raise ValueError(f"unknown policy {bad[0]!r}; choices: {', '.join(names)}")
    if args.qps:
        grid = tuple(sorted(float(q) for q in args.qps.split(",")))
    elif trace in DEFAULT_GRIDS:
        grid = DEFAULT_GRIDS[trace]
    else:
        raise ValueError(f"--qps is needed for trace {trace!r} (no default grid)")
    if not grid or grid[0] <= 0:
        raise ValueError("--qps values must be > 0")
    if not 0 < args.target <= 1:
        raise ValueError("--target must be in (0, 1]")
    n = args.requests or DEFAULT_REQUESTS.get(trace, 1000)
    return CapacityConfig(trace, tuple(pols), tuple(float(q) for q in grid), args.model, args.tp,
                          args.gpus, args.hardware, n, args.seed, args.tbt_slo_ms,
                          args.ttft_slo_ms, args.target, args.bisect_steps, args.jobs,
                          _overrides(args.set))


def _overrides(items: list[str]) -> dict[str, object]:
    """``FIELD=VALUE`` pairs as SimConfig values (typed by the field's default)."""
    kinds = {f.name: f for f in fields(SimConfig)}
    out: dict[str, object] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in kinds:
            raise ValueError(f"--set {item!r}: expected FIELD=VALUE with FIELD one of "
                             f"{', '.join(kinds)}")
        kind = type(kinds[name].default) if kinds[name].default is not None else float
        try:
            out[name] = kind(value)
        except ValueError:
            raise ValueError(f"--set {item!r}: {value!r} is not a {kind.__name__}") from None
    return out


def _without_out(argv: list[str]) -> list[str]:
    """The command for the stamp, less ``--out DIR``: the file's own folder, and often a
    temporary one that must not reach a committed result."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--out":
            skip = True
        elif not a.startswith("--out="):
            out.append(a)
    return out


def _index(out_dir: str) -> str:
    """README.md of the results folder: every sweep's table, sorted by file name."""
    parts = ["# Capacity on the simulator", "",
             "Written by `python -m benchmark.capacity` (`make capacity`); one section per sweep "
             "(`<trace>-<model>-tp<tp>.{json,png,md}`). Simulated, not measured on GPUs.", ""]
    for md in sorted(glob.glob(os.path.join(out_dir, "*.md"))):
        if os.path.basename(md) != "README.md":
            with open(md) as f:
                parts.append(f.read())
    path = os.path.join(out_dir, "README.md")
    with open(path, "w") as f:
        f.write("\n".join(parts))
    return path


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    traces = list(DEFAULT_GRIDS) if args.trace == "all" else [args.trace]
    try:
        cfgs = [_config(args, t) for t in traces]
        for cfg in cfgs:
            cfg.sim_config(cfg.policies[0], cfg.grid[0]).validate()
    except ValueError as e:
        print(f"benchmark.capacity: error: {e}", file=sys.stderr)
        return 2
    for cfg in cfgs:
        print(f"capacity sweep: {report.title(cfg.to_dict())}", flush=True)
        result = run_sweep(cfg, quiet=args.quiet)
        result["ratios"] = report.ratios(result)
        path = os.path.join(args.out, report.stem(result["config"]) + ".json")
        write_result(path, result, argv=_without_out(sys.argv if argv is None else
                                                     ["benchmark.capacity", *argv]))
        png, md = report.write(result, args.out)
        caps = {p: r["capacity_qps"] for p, r in result["policies"].items()}
        print(f"  capacities {json.dumps(caps)}; {result['ratios']}; {result['wall_s']} s",
              flush=True)
        print(f"  wrote {path}, {png}, {md}", flush=True)
    print(f"index: {_index(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
