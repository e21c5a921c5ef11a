"""`benchmark.capacity.wall`: pass shares per setting, QPS and seed, with the simulator replaced
by a pass rule per (policy, router, seed)."""

from __future__ import annotations

import json

import pytest

import benchmark.capacity.wall as wall
from benchmark.capacity.search import Point, Setting

LIMIT = {"duet": 40.0, "round-robin": 41.0, "sglang-pdmux": 41.0}  # at seed 0; +seed


def _sweep(tmp_path):
    body = {"config": {"cluster": {"trace": "azure-conv", "model": "qwen3-8b", "tp": 1,
                                   "gpus": 2, "seed": 0}, "requests": 100},
            "policies": {"duet": {"best": {"setting": {"max_lookahead": 16}}},
                         "sglang-pdmux": {"best": {"setting": {"pdmux_decode_bs_divisor": 144}}}}}
    (tmp_path / "azure-conv-qwen3-8b-tp1.json").write_text(json.dumps(body))
    return body


def test_pass_shares_and_half_pass_qps(tmp_path, monkeypatch):
    _sweep(tmp_path)
    seen = []

    def evaluate(cl, s, qps, requests):
        knobs = dict(s.knobs)
        seen.append((s.policy, s.knobs, cl.seed, requests))
        key = knobs.get("router", s.policy)
        ok = qps <= LIMIT[key] + cl.seed
        steady = {"keeps_up": ok, "attainment": 1.0, "ttft_rise_s": 0.0 if ok else 2.0}
        return Point(qps, requests, {"steady": steady})

    monkeypatch.setattr(wall, "evaluate", evaluate)
    argv = ["--case", "azure-conv-qwen3-8b-tp1", "--settings", "duet", "duet:router=round-robin",
            "sglang-pdmux", "--qps", "41.5", "40.5", "--seeds", "0", "1", "--jobs", "1",
            "--out", str(tmp_path)]
    assert wall.main(argv) == 0
    assert ("duet", (("max_lookahead", 16), ("router", "round-robin")), 1, 100) in seen
    body = json.loads((tmp_path / "wall" / "azure-conv-qwen3-8b-tp1.json").read_text())
    rows = body["settings"]
    assert body["qps"] == [40.5, 41.5]
    assert rows["duet"]["pass_share"] == [0.5, 0.0]  # seed 1 passes 40.5, seed 0 neither
    assert rows["duet"]["half_pass_qps"] == 40.5
    assert rows["duet:router=round-robin"]["pass_share"] == [1.0, 0.5]
    assert rows["sglang-pdmux"]["passes"]["41.5"] == [False, True]
    assert rows["duet:router=round-robin"]["half_pass_qps"] == 41.5
    assert not rows["duet:router=round-robin"]["bracketed"] and rows["duet"]["bracketed"]
    assert "| sglang-pdmux (pdmux_decode_bs_divisor=144) | 1.00 | 0.50 | >= 41.5 |" in (
        tmp_path / "wall" / "azure-conv-qwen3-8b-tp1.md").read_text()


def test_half_pass_qps():
    assert wall.half_pass_qps([1.0, 2.0, 3.0], [1.0, 0.75, 0.25]) == pytest.approx(2.5)
    assert wall.half_pass_qps([1.0, 2.0], [0.25, 0.0]) is None
    assert wall.half_pass_qps([1.0, 2.0], [1.0, 1.0]) == 2.0  # not bracketed: the last passing
    # non-monotone near the wall: the last crossing counts
    assert wall.half_pass_qps([1.0, 2.0, 3.0, 4.0], [1.0, 0.0, 1.0, 0.0]) == pytest.approx(3.5)


def test_parse_setting_and_bad_input(tmp_path, capsys):
    body = _sweep(tmp_path)
    assert wall.parse_setting("duet", body) == Setting("duet", (("max_lookahead", 16),))
    got = wall.parse_setting("duet:router=round-robin,max_lookahead=64", body)
    assert got == Setting("duet", (("max_lookahead", 64), ("router", "round-robin")))
    with pytest.raises(ValueError, match="no policy"):
        wall.parse_setting("dynamo", body)
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        wall.parse_setting("duet:nope=1", body)
    with pytest.raises(ValueError, match="seed is set by the case or the grid"):
        wall.parse_setting("duet:seed=3", body)
    base = ["--settings", "duet", "--qps", "40", "--out", str(tmp_path)]
    assert wall.main(["--case", "missing", *base]) == 2
    assert wall.main(["--case", "azure-conv-qwen3-8b-tp1", "--settings", "dynamo", "--qps",
                      "40", "--out", str(tmp_path)]) == 2
    assert "error" in capsys.readouterr().err
