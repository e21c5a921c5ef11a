"""Decision cost and simulator speed of several commits, side by side in one run.

A refactor promises "no slower": on a shared, noisy machine that can only be checked by timing the
commits against each other in the same minutes. This checks out each ref in a temporary
worktree, then runs, round after round with the refs interleaved, each ref's own
``benchmark.policy.decision_cost`` (``--iters N``) and ``benchmark.sim.speed``, and reports per
ref and per case the lowest median over the rounds (the least disturbed round, as ``timeit``
reports its best run) plus every round's figure.

    python -m benchmark.ab --refs a2fba78 HEAD [--rounds 11] [--iters 800] [--sim-rounds 4]
        [--out benchmark/results/ab/NAME.json]

Each ref runs with its own code on PYTHONPATH (``python/`` and the worktree root) and this
interpreter. The ratios are against the first ref.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmark.stamp import ROOT, write_result


def _worktree(ref: str, commit: str, into: Path) -> Path:
    path = into / "".join(ch if ch.isalnum() else "_" for ch in ref)
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit],
                   check=True, capture_output=True, text=True)
    return path


def _run(tree: Path, module: str, out: Path, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{tree / 'python'}{os.pathsep}{tree}"}
    subprocess.run([sys.executable, "-m", module, "--out", str(out), *args], cwd=tree, env=env,
                   check=True, capture_output=True, text=True)
    return json.loads(out.read_text())


def compare(refs: list[str], rounds: int, iters: int, sim_rounds: int) -> dict:
    commits = {ref: _commit(ref) for ref in refs}  # before the checkouts: a ref may move later
    with tempfile.TemporaryDirectory(prefix="duet-ab-") as tmp:
        tmp_path = Path(tmp)
        trees = {ref: _worktree(ref, commits[ref], tmp_path) for ref in refs}
        try:
            plans: dict[str, dict[str, list[float]]] = {ref: {} for ref in refs}
            for i in range(rounds):
                for ref, tree in trees.items():
                    res = _run(tree, "benchmark.policy.decision_cost", tmp_path / f"dc{i}.json",
                               "--iters", str(iters))
                    for case, us in res["medians_us"].items():
                        plans[ref].setdefault(case, []).append(us)
            sim: dict[str, list[float]] = {ref: [] for ref in refs}
            for i in range(sim_rounds):
                for ref, tree in trees.items():
                    res = _run(tree, "benchmark.sim.speed", tmp_path / f"sim{i}.json")
                    sim[ref].append(res["best_s"])
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(tree)], capture_output=True, check=False)
    base = refs[0]
    cases = list(plans[base])
    best = {ref: {c: min(plans[ref][c]) for c in cases if c in plans[ref]} for ref in refs}
    return {
        "refs": commits,
        "rounds": rounds,
        "iters": iters,
        "plan_median_us_best": best,
        "plan_ratio_to_first": {ref: {c: round(best[ref][c] / best[base][c], 3)
                                      for c in best[ref]} for ref in refs},
        "plan_median_us_rounds": plans,
        "sim_best_s": {ref: min(v) for ref, v in sim.items()} if sim_rounds else {},
        "sim_ratio_to_first": ({ref: round(min(v) / min(sim[base]), 3) for ref, v in sim.items()}
                               if sim_rounds else {}),
        "sim_best_s_rounds": sim,
    }


def _commit(ref: str) -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", ref],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refs", nargs="+", required=True, help="git refs; ratios against the first")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--iters", type=int, default=800)
    ap.add_argument("--sim-rounds", type=int, default=4)
    ap.add_argument("--out", default=None, help="default: benchmark/results/ab/<refs>.json")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.iters < 1 or args.sim_rounds < 0 or len(set(args.refs)) < 2:
        ap.error("need >= 2 distinct refs, --rounds >= 1, --iters >= 1, --sim-rounds >= 0")
    result = compare(args.refs, args.rounds, args.iters, args.sim_rounds)
    name = "-vs-".join(result["refs"].values())
    out = args.out or ROOT / "benchmark" / "results" / "ab" / f"{name}.json"
    for ref in args.refs:
        ratios = result["plan_ratio_to_first"][ref]
        print(ref, " ".join(f"{r:.3f}" for r in ratios.values()),
              "sim", result["sim_ratio_to_first"].get(ref))
    print(f"wrote {write_result(out, result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
