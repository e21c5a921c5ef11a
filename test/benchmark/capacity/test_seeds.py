"""`benchmark.capacity.seeds`: each seed's capacities at the sweep's best settings, and the ratio
summary, with the simulator replaced by a pass rule per (policy, seed)."""

from __future__ import annotations

import json

import benchmark.capacity.search as search
from benchmark.capacity.search import Point
from benchmark.capacity.seeds import main, ratio_summary, sweep_names

LIMITS = {("duet", 1): 30.0, ("sglang-pdmux", 1): 31.0, ("duet", 2): 33.0,
          ("sglang-pdmux", 2): 30.0}


def _sweep(tmp_path, name="azure-conv-qwen3-8b-tp1"):
    body = {"config": {"cluster": {"trace": "azure-conv", "model": "qwen3-8b", "tp": 1,
                                   "gpus": 2, "seed": 0}, "requests": 100},
            "ratios": {"best_alternative": "sglang-pdmux"},
            "policies": {"duet": {"best": {"setting": {}, "capacity_qps": 38.0,
                                           "short_run_qps": 40.0}},  # a 2x run set 38
                         "sglang-pdmux": {"best": {"setting": {"pdmux_decode_bs_divisor": 144},
                                                   "capacity_qps": 41.0}},
                         "dynamo": {"best": {"setting": {}, "capacity_qps": 1.0}}}}
    (tmp_path / f"{name}.json").write_text(json.dumps(body))
    (tmp_path / "summary.json").write_text("{}")  # not a sweep


def test_each_seed_runs_both_best_settings_and_the_ratios_are_summarised(tmp_path, monkeypatch):
    _sweep(tmp_path)
    seen = []

    def evaluate(cl, s, qps, requests):
        seen.append((s.policy, s.knobs, cl.seed, requests))
        ok = qps <= LIMITS[(s.policy, cl.seed)]
        steady = {"keeps_up": ok, "attainment": 1.0 if ok else 0.0}
        return Point(round(qps, 4), requests, {"steady": steady})

    monkeypatch.setattr(search, "evaluate", evaluate)
    assert sweep_names(str(tmp_path)) == ["azure-conv-qwen3-8b-tp1"]
    assert main(["--seeds", "1", "2", "--jobs", "1", "--out", str(tmp_path)]) == 0
    assert {(p, k, seed, n) for p, k, seed, n in seen} == {
        ("duet", (), 1, 100), ("duet", (), 2, 100),
        ("sglang-pdmux", (("pdmux_decode_bs_divisor", 144),), 1, 100),
        ("sglang-pdmux", (("pdmux_decode_bs_divisor", 144),), 2, 100)}
    body = json.loads((tmp_path / "seeds.json").read_text())
    case = body["cases"]["azure-conv-qwen3-8b-tp1"]
    assert case["alternative"] == "sglang-pdmux" and body["seeds"] == [0, 1, 2]
    rows = {r["seed"]: r for r in case["per_seed"]}
    assert (rows[0]["duet"], rows[0]["alternative"]) == (40.0, 41.0)  # the sweep's own
    for seed in (1, 2):
        for pol, key in (("duet", "duet"), ("sglang-pdmux", "alternative")):
            assert LIMITS[(pol, seed)] / 1.025 <= rows[seed][key] <= LIMITS[(pol, seed)]
    assert case["summary"]["below"] == 2 and case["summary"]["seeds"] == 3
    assert "| azure-conv-qwen3-8b-tp1 |" in (tmp_path / "seeds.md").read_text()


def test_bad_cases_and_seed_0_exit_2(tmp_path, capsys):
    assert main(["--out", str(tmp_path)]) == 2  # no sweep at all
    _sweep(tmp_path)
    assert main(["--cases", "nope", "--out", str(tmp_path)]) == 2
    assert "nope" in capsys.readouterr().err
    try:
        main(["--seeds", "0", "--out", str(tmp_path)])
    except SystemExit as e:
        assert e.code == 2
    else:
        raise AssertionError("seed 0 must be refused")


def test_ratio_summary():
    s = ratio_summary([0.95, 1.05, 1.0])
    assert s == {"mean": 1.0, "min": 0.95, "max": 1.05, "seeds": 3, "below": 1}


def test_a_reference_row_as_the_best_alternative_runs_its_own_setting():
    """A sweep whose best alternative is sglang-chunked's hrrn reference row (after SGLang
    0.5.17) hands seeds that row's setting under sglang-chunked, by the row's name."""
    from benchmark.capacity.seeds import case_settings

    sweep = {"config": {"cluster": {"trace": "mooncake", "model": "qwen3-8b", "tp": 1,
                                    "gpus": 2, "seed": 0}, "requests": 100},
             "ratios": {"best_alternative": "sglang-chunked+hrrn"},
             "policies": {"duet": {"best": {"setting": {}, "capacity_qps": 1.5}},
                          "sglang-chunked": {
                              "best": {"setting": {"token_budget": 2048}, "capacity_qps": 1.3},
                              "reference_hrrn": {"setting": {"token_budget": 2048,
                                                             "schedule_policy": "hrrn"},
                                                 "capacity_qps": 1.4}}}}
    _, n, pols = case_settings(sweep)
    assert n == 100 and set(pols) == {"duet", "sglang-chunked+hrrn"}
    s, cap = pols["sglang-chunked+hrrn"]
    assert s.policy == "sglang-chunked" and cap == 1.4
    assert dict(s.knobs) == {"token_budget": 2048, "schedule_policy": "hrrn"}
