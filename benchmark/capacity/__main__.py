"""``python -m benchmark.capacity --trace T [--policies ...] [--model --tp --gpus] [--requests N]``:
steady-state capacity per policy on the simulator, each system at its defaults and at its
best-tuned setting (`sweep.py`), written to
``benchmark/results/capacity/<trace>-<model>-tp<tp>.{json,png,md}`` plus ``README.md`` there
(every sweep's table). ``--trace all`` sweeps the three named traces."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import fields

from benchmark.stamp import write_result
from sglang_duet.sim import SimConfig, policy_names
from sglang_duet.sim.policies import check_config

from . import report
from .search import Cluster, Setting
from .sweep import DEFAULT_REQUESTS, START_QPS, SweepConfig, run_sweep

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(ROOT, "benchmark", "results", "capacity")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmark.capacity",
                                 description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--trace", default="azure-code",
                    help=f"{', '.join(START_QPS)}, a trace path, or all")
    ap.add_argument("--policies", default="all",
                    help=f"comma-separated ({', '.join(policy_names())}) or all")
    ap.add_argument("--model", default="qwen3-8b")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--hardware", default="h100-sxm")
    ap.add_argument("--requests", type=int, default=None,
                    help=f"requests per run (default per trace: {DEFAULT_REQUESTS})")
    ap.add_argument("--start-qps", type=float, default=None,
                    help="first QPS probed (default per trace, scaled by GPUs / 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tbt-slo-ms", type=float, default=100.0)
    ap.add_argument("--ttft-slo-ms", type=float, default=10000.0)
    ap.add_argument("--target", type=float, default=0.9, help="attainment a capacity needs")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="override a simulator setting for every run (a SimConfig field, e.g. "
                         "interference=none); repeatable")
    ap.add_argument("--no-tune", action="store_true", help="defaults only (no knob search)")
    ap.add_argument("--quick", action="store_true",
                    help="two values per knob (the ends of each grid)")
    ap.add_argument("--no-length-check", action="store_true",
                    help="skip the run with twice the requests")
    ap.add_argument("--keep-others", action="store_true",
                    help="with --policies: keep every other policy's result from the sweep's "
                         "existing JSON, each marked with the commit it was run at (for a "
                         "change that touches only the swept policies' code)")
    ap.add_argument("--extend", action="store_true",
                    help="carry the committed sweep (the output folder's JSON) on over the knobs "
                         "its trials never tried (sweep.py's docstring); with --policies, those "
                         "only, the others kept")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--out", default=DEFAULT_OUT, help="output folder")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    return ap


def _config(args: argparse.Namespace, trace: str) -> SweepConfig:
    names = policy_names()
    pols = names if args.policies == "all" else [p.strip() for p in args.policies.split(",")]
    bad = [p for p in pols if p not in names]
    if bad:
        raise ValueError(f"unknown policy {bad[0]!r}; choices: {', '.join(names)}")
    if not 0 < args.target <= 1:
        raise ValueError("--target must be in (0, 1]")
    start = args.start_qps or START_QPS.get(trace, 4.0) * args.gpus / 2
    if not start > 0:
        raise ValueError("--start-qps must be > 0")
    n = args.requests or DEFAULT_REQUESTS.get(trace, 2000)
    cluster = Cluster(trace, args.model, args.tp, args.gpus, args.hardware, args.seed,
                      args.tbt_slo_ms, args.ttft_slo_ms, args.target, _overrides(args.set))
    return SweepConfig(cluster, tuple(pols), n, start, not args.no_tune, args.quick,
                       not args.no_length_check, args.jobs)


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
            out[name] = _parse_bool(value) if kind is bool else kind(value)
        except ValueError:
            raise ValueError(f"--set {item!r}: {value!r} is not a {kind.__name__}") from None
    return out


def _parse_bool(value: str) -> bool:
    """``true``/``false`` (or 1/0, yes/no, on/off): ``bool("false")`` would be True."""
    v = value.strip().lower()
    if v in ("true", "1", "yes", "on"):
        return True
    if v in ("false", "0", "no", "off"):
        return False
    raise ValueError(value)


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


def keep_others(result: dict, path: str) -> dict:
    """``result`` plus every policy of the existing sweep at ``path`` that it did not run, each
    with ``carried_from`` (that file's commit and command), in the existing sweep's order."""
    if not os.path.exists(path):
        return result
    with open(path) as f:
        old = json.load(f)
    if old["config"]["cluster"] != result["config"]["cluster"]:
        raise ValueError(f"{path}: another cluster; --keep-others needs the same one")
    stamp = old.get("stamp", {})
    origin = {"commit": stamp.get("commit"), "command": stamp.get("command")}
    pols: dict = {}
    for pol, r in old["policies"].items():
        if pol in result["policies"]:
            pols[pol] = result["policies"][pol]
        else:
            pols[pol] = {**r, "carried_from": r.get("carried_from", origin)}
    pols.update({p: r for p, r in result["policies"].items() if p not in pols})
    cfg = {**result["config"], "policies": list(pols)}
    return {**result, "config": cfg, "policies": pols}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    traces = list(START_QPS) if args.trace == "all" else [args.trace]
    if args.keep_others and args.policies == "all":
        print("benchmark.capacity: error: --keep-others needs --policies (the ones to rerun)",
              file=sys.stderr)
        return 2
    try:
        cfgs = [_config(args, t) for t in traces]
        for cfg in cfgs:
            for pol in cfg.policies:
                sc = cfg.cluster.sim_config(Setting(pol), cfg.start_qps, cfg.requests).validate()
                check_config(sc)
    except ValueError as e:
        print(f"benchmark.capacity: error: {e}", file=sys.stderr)
        return 2
    for cfg in cfgs:
        print(f"capacity sweep: {report.title(cfg.to_dict())}", flush=True)
        path = os.path.join(args.out, report.stem(cfg.to_dict()) + ".json")
        resume = None
        if args.extend:
            if not os.path.exists(path):
                print(f"benchmark.capacity: error: --extend: no sweep at {path}", file=sys.stderr)
                return 2
            with open(path) as f:
                resume = json.load(f)
            if resume["config"]["cluster"] != cfg.to_dict()["cluster"]:
                print(f"benchmark.capacity: error: --extend: {path} is another cluster",
                      file=sys.stderr)
                return 2
        result = run_sweep(cfg, args.out, quiet=args.quiet, resume=resume)
        if args.keep_others or args.extend:
            result = keep_others(result, path)
        result["ratios"] = report.ratios(result)
        write_result(path, result, argv=_without_out(sys.argv if argv is None else
                                                     ["benchmark.capacity", *argv]))
        png, md = report.write(result, args.out)
        caps = {p: r["best"]["capacity_qps"] for p, r in result["policies"].items()}
        print(f"  best-tuned capacities {json.dumps(caps)}; {result['ratios']}; "
              f"{result['wall_s']} s", flush=True)
        print(f"  wrote {path}, {png}, {md}", flush=True)
    print(f"index: {report.write_index(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
