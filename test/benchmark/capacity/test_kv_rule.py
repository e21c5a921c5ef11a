"""`benchmark.capacity.kv_rule`: each variant's thresholds hold during its run only, the points
are each seed's higher capacity, and the table has one cell per (variant, point)."""

from __future__ import annotations

import json

import benchmark.capacity.kv_rule as kv_rule
from benchmark.capacity.search import Point
from sglang_duet.policy import backlog

SWEEP = {"config": {"cluster": {"trace": "mooncake", "model": "qwen3-8b", "tp": 1, "gpus": 2,
                                "seed": 0}, "requests": 50},
         "ratios": {"best_alternative": "sglang-pdmux"},
         "policies": {"duet": {"best": {"setting": {}, "capacity_qps": 1.5}},
                      "sglang-pdmux": {"best": {"setting": {}, "capacity_qps": 1.6}}}}
SEEDS = {"cases": {"mooncake-qwen3-8b-tp1": {"per_seed": [
    {"seed": 0, "duet": 1.5, "alternative": 1.6}, {"seed": 1, "duet": 1.7, "alternative": 1.6},
    {"seed": 2, "duet": 1.0, "alternative": 1.0}]}}}


def _folder(tmp_path):
    (tmp_path / "mooncake-qwen3-8b-tp1.json").write_text(json.dumps(SWEEP))
    (tmp_path / "seeds.json").write_text(json.dumps(SEEDS))
    return tmp_path


def test_patched_sets_the_thresholds_inside_the_block_only():
    low, split = backlog.KV_LOW, backlog.KV_SPLIT_AT
    with kv_rule.patched({"KV_LOW": 0.55, "KV_SPLIT_AT": 0.9}):
        assert (backlog.KV_LOW, backlog.KV_SPLIT_AT) == (0.55, 0.9)
        assert not backlog.split_only(0.8) and backlog.auto_share(0.55) == 1.0
    assert (backlog.KV_LOW, backlog.KV_SPLIT_AT) == (low, split)


def test_points_are_the_higher_capacity_of_each_chosen_seed(tmp_path):
    pts = kv_rule.points(SEEDS, str(_folder(tmp_path)), ["mooncake-qwen3-8b-tp1"], [0, 1])
    assert [(c, cl.seed, n, q) for c, cl, n, q in pts] == [
        ("mooncake-qwen3-8b-tp1", 0, 50, 1.6), ("mooncake-qwen3-8b-tp1", 1, 50, 1.7)]


def test_main_runs_every_variant_at_every_point_with_its_constants(tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    seen = []

    def evaluate(cl, s, qps, requests):
        seen.append((backlog.KV_LOW, backlog.KV_SPLIT_AT, dict(s.knobs), cl.seed))
        ok = backlog.KV_LOW >= 0.5  # the raised thresholds pass, the committed ones fail
        steady = {"keeps_up": ok, "attainment": 0.95 if ok else 0.85, "ttft_rise_s": 0.0,
                  "admitted_ratio": 1.0}
        return Point(round(qps, 4), requests, {"steady": steady})

    monkeypatch.setattr(kv_rule, "evaluate", evaluate)
    out = tmp_path / "out" / "thresholds"
    assert kv_rule.main(["--folder", str(folder), "--out", str(out), "--jobs", "1",
                         "--cases", "mooncake-qwen3-8b-tp1", "--seeds", "0", "2"]) == 0
    assert len(seen) == 2 * len(kv_rule.VARIANTS)
    assert (0.6, 0.7, {}, 0) in seen and (backlog.KV_LOW, 2.0, {}, 2) in seen
    assert (backlog.KV_LOW, backlog.KV_SPLIT_AT, {"duet_backlog_share": 1.0}, 0) in seen
    body = json.loads(out.with_suffix(".json").read_text())
    assert body["stamp"]["commit"] and len(body["rows"]) == len(seen)
    md = out.with_suffix(".md").read_text()
    assert md.count("| pass (0.950") == 2 * 2 and "FAIL (0.850" in md
    assert "mooncake-qwen3-8b-tp1 s0 @ 1.6" in md and "s1 @" not in md
