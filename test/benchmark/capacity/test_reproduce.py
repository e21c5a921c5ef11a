"""The reproduction check: a committed best point re-runs equal; a tampered one does not."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from benchmark.capacity.reproduce import reproduces
from benchmark.capacity.search import CACHE, Cluster

RESULTS = Path(__file__).resolve().parents[3] / "benchmark" / "results" / "capacity"


def test_a_committed_point_reproduces_and_a_tampered_one_does_not():
    CACHE.dir = None
    with open(RESULTS / "azure-code-qwen3-8b-tp1.json") as f:
        sweep = json.load(f)
    cl, n = Cluster(**sweep["config"]["cluster"]), int(sweep["config"]["requests"])
    best = sweep["policies"]["vllm-chunked"]["best"]
    assert reproduces(cl, "vllm-chunked", best, n) == n
    wrong = copy.deepcopy(best)
    wrong["at_capacity"]["steady"]["attainment"] -= 0.01
    assert reproduces(cl, "vllm-chunked", wrong, n) is None


def test_the_committed_check_covers_every_sweep():
    with open(RESULTS / "reproduce.json") as f:
        got = json.load(f)
    sweeps = sorted(p.stem for p in RESULTS.glob("*-tp*.json"))
    assert sorted(got["cases"]) == sweeps
    assert got["points"] == sum(len(c["policies"]) for c in got["cases"].values()) >= 6 * 7
    assert got["different"] == 0
