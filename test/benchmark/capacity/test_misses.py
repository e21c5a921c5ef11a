"""`benchmark.capacity.misses`: each policy's best setting run at its capacity and just past it,
the window's requests split by cause (real, short simulations)."""

from __future__ import annotations

import json

import pytest

from benchmark.capacity.misses import main


def _sweep(tmp_path, name="azure-code-qwen3-8b-tp1"):
    body = {"config": {"cluster": {"trace": "azure-code", "model": "qwen3-8b", "tp": 1,
                                   "gpus": 1, "seed": 0}, "requests": 200},
            "ratios": {"best_alternative": "sglang-chunked"},
            "policies": {"duet": {"best": {"setting": {}, "capacity_qps": 8.0}},
                         "sglang-chunked": {"best": {"setting": {"token_budget": 8192},
                                                     "capacity_qps": 6.0}}}}
    (tmp_path / f"{name}.json").write_text(json.dumps(body))


def test_both_policies_at_capacity_and_past_it(tmp_path):
    _sweep(tmp_path)
    assert main(["--over", "3", "--jobs", "1", "--out", str(tmp_path)]) == 0
    body = json.loads((tmp_path / "misses.json").read_text())
    case = body["cases"]["azure-code-qwen3-8b-tp1"]
    assert set(case) == {"duet", "sglang-chunked"}
    assert case["sglang-chunked"]["setting"] == "token_budget=8192"
    for pol, cap in (("duet", 8.0), ("sglang-chunked", 6.0)):
        pts = case[pol]["points"]
        assert [p["qps"] for p in pts] == [cap, 3 * cap]
        for p in pts:
            c = p["causes"]
            assert sum(v for k, v in c.items() if k != "window") == c["window"] == 160
            assert c["met"] / c["window"] == pytest.approx(p["attainment"], abs=1e-4)
        assert pts[1]["attainment"] < pts[0]["attainment"]  # three times the load: misses
    assert "| azure-code-qwen3-8b-tp1 | duet (defaults) | 8 |" in (
        tmp_path / "misses.md").read_text()


def test_bad_arguments_exit_2(tmp_path, capsys):
    assert main(["--out", str(tmp_path)]) == 2  # no sweep at all
    _sweep(tmp_path)
    assert main(["--cases", "nope", "--out", str(tmp_path)]) == 2
    assert "nope" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["--over", "1", "--out", str(tmp_path)])
    assert e.value.code == 2
