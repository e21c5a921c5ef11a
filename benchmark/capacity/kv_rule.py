"""``python -m benchmark.capacity.kv_rule``: the KV-occupancy rule's thresholds, trace by trace.

The automatic backlog share (`policy/backlog.py`) lowers duet's decode-step target as the KV
pool fills and stops mixed batches from ``KV_SPLIT_AT`` held. Its thresholds were chosen on
azure-conv, where the pool binds; on mooncake, where prefill compute binds, the same rule costs
prefill throughput. This measures the trade: for each variant (the module's thresholds patched
for the run, or a fixed share) and each case and seed of ``seeds.json``, one simulation at the
higher of duet's and the best-tuned alternative's capacity on that seed (the load duet must hold
to be level with the alternative there), at the sweep's run length, and whether it passes the
capacity rule (`search.passes`). A variant that passes where the committed rule fails gains
capacity on that seed; one that fails where it passes loses it.

    python -m benchmark.capacity.kv_rule [--cases azure-conv-qwen3-8b-tp1 mooncake-qwen3-8b-tp1]
                                         [--seeds 0 1 2 3] [--jobs 2]

Writes ``benchmark/results/capacity/kv-backlog/thresholds.{json,md}`` (stamped).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from benchmark.stamp import write_result
from sglang_duet.policy import backlog

from .search import CACHE, Cluster, Setting, evaluate, passes
from .seeds import DEFAULT_OUT as CAPACITY_DIR
from .seeds import case_settings
from .sweep import _pool_map

__all__ = ["VARIANTS", "main", "patched", "points"]

OUT = os.path.join(CAPACITY_DIR, "kv-backlog", "thresholds")
# name -> (backlog constants patched for the run, SimConfig knobs of duet)
VARIANTS: dict[str, tuple[dict[str, float], dict[str, Any]]] = {
    "committed (0.4 / 0.7 / 0.3, split 0.5)": ({}, {}),
    "0.5 / 0.8 / 0.3, split 0.6": ({"KV_LOW": 0.5, "KV_HIGH": 0.8, "KV_SPLIT_AT": 0.6}, {}),
    "0.6 / 0.9 / 0.3, split 0.7": ({"KV_LOW": 0.6, "KV_HIGH": 0.9, "KV_SPLIT_AT": 0.7}, {}),
    "committed share, no split rule": ({"KV_SPLIT_AT": 2.0}, {}),
    "fixed share 1 (no split rule)": ({}, {"duet_backlog_share": 1.0}),
}
CASES = ("azure-conv-qwen3-8b-tp1", "mooncake-qwen3-8b-tp1")


@contextmanager
def patched(consts: dict[str, float]) -> Iterator[None]:
    """``backlog``'s thresholds set to ``consts`` inside the block (restored after)."""
    old = {k: getattr(backlog, k) for k in consts}
    try:
        for k, v in consts.items():
            setattr(backlog, k, v)
        yield
    finally:
        for k, v in old.items():
            setattr(backlog, k, v)


def points(seeds_json: dict[str, Any], folder: str, cases: list[str], seeds: list[int]
           ) -> list[tuple[str, Cluster, int, float]]:
    """(case, cluster at the seed, requests, QPS: the higher of the seed's two capacities)."""
    out = []
    for name in cases:
        with open(os.path.join(folder, f"{name}.json"), encoding="utf-8") as f:
            cl, requests, _ = case_settings(json.load(f))
        for row in seeds_json["cases"][name]["per_seed"]:
            if row["seed"] in seeds:
                qps = max(row["duet"], row["alternative"])
                out.append((name, replace(cl, seed=row["seed"]), requests, qps))
    return out


def _run(task: tuple[str, str, Cluster, int, float]) -> dict[str, Any]:
    variant, case, cl, requests, qps = task
    consts, knobs = VARIANTS[variant]
    CACHE.points.clear()  # the key holds the SimConfig, not the patched constants
    with patched(consts):
        p = evaluate(cl, Setting("duet", tuple(sorted(knobs.items()))), qps, requests)
    s = p.metrics["steady"]
    return {"variant": variant, "case": case, "seed": cl.seed, "qps": p.qps,
            "passes": passes(p, cl.target), "keeps_up": s["keeps_up"],
            "attainment": round(s["attainment"], 4), "ttft_rise_s": round(s["ttft_rise_s"], 3),
            "admitted_ratio": round(s["admitted_ratio"], 4)}


def markdown(rows: list[dict[str, Any]]) -> str:
    cols = sorted({(r["case"], r["seed"], r["qps"]) for r in rows})
    head = "| variant | " + " | ".join(f"{c} s{s} @ {q:g}" for c, s, q in cols) + " |"
    lines = ["# KV-occupancy rule: thresholds, trace by trace", "",
             "Written by `python -m benchmark.capacity.kv_rule` (see its docstring). One duet "
             "run per cell at the higher of duet's and the best-tuned alternative's capacity "
             "on that seed (`seeds.json`); cell: pass/FAIL (attainment, TTFT rise s, admitted "
             "ratio).", "", head, "|---|" + "---|" * len(cols)]
    for v in VARIANTS:
        got = {(r["case"], r["seed"], r["qps"]): r for r in rows if r["variant"] == v}
        cells = []
        for c in cols:
            r = got.get(c)
            cells.append("-" if r is None else
                         f"{'pass' if r['passes'] else 'FAIL'} ({r['attainment']:.3f}, "
                         f"{r['ttft_rise_s']:.2f}, {r['admitted_ratio']:.3f})")
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--folder", default=CAPACITY_DIR)
    ap.add_argument("--out", default=OUT, help="output path without extension")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with open(os.path.join(args.folder, "seeds.json"), encoding="utf-8") as f:
        seeds_json = json.load(f)
    CACHE.open(None)  # no point file: patched constants are not in the point cache's key
    tasks = [(v, *pt) for v in VARIANTS
             for pt in points(seeds_json, args.folder, args.cases, args.seeds)]
    rows: list[dict[str, Any]] = []
    _pool_map(_run, tasks, args.jobs, lambda r: (rows.append(r), print(r, flush=True)))
    rows.sort(key=lambda r: (list(VARIANTS).index(r["variant"]), r["case"], r["seed"]))
    write_result(f"{args.out}.json", {"benchmark": "kv_rule thresholds", "rows": rows,
                                      "wall_s": round(time.perf_counter() - t0, 1)},
                 argv=argv if argv is not None else sys.argv)
    with open(f"{args.out}.md", "w", encoding="utf-8") as f:
        f.write(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
