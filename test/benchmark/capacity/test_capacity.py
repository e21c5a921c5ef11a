"""The capacity benchmark: the bisection rule on hand-made points, and a tiny end-to-end run."""

from __future__ import annotations

import json

from benchmark.capacity.__main__ import main
from benchmark.capacity.sweep import Point, capacity_of


def _pts(pairs):
    return [Point("p", q, {"slo_both_attainment": a}) for q, a in pairs]


class TestCapacityOf:
    def test_between_last_pass_and_first_fail(self):
        pts = _pts([(4, 1.0), (8, 0.95), (16, 0.5), (32, 0.0)])
        assert capacity_of(pts, [4, 8, 16, 32], 0.9) == (8, 16, False)

    def test_bisection_points_refine(self):
        pts = _pts([(4, 1.0), (8, 0.95), (16, 0.5), (12, 0.92), (14, 0.85)])
        assert capacity_of(pts, [4, 8, 16], 0.9) == (12, 14, False)

    def test_a_pass_above_a_failure_does_not_count(self):
        pts = _pts([(4, 0.95), (8, 0.8), (16, 0.95)])
        assert capacity_of(pts, [4, 8, 16], 0.9) == (4, 8, False)

    def test_all_pass_is_above_grid_and_first_fail_is_zero(self):
        assert capacity_of(_pts([(4, 1.0), (8, 0.99)]), [4, 8], 0.9) == (8, None, True)
        assert capacity_of(_pts([(4, 0.1), (8, 0.0)]), [4, 8], 0.9) == (0.0, 4, False)


def test_tiny_sweep_writes_json_plot_and_table(tmp_path):
    rc = main(["--trace", "azure-code", "--policies", "duet,sglang-chunked", "--requests", "60",
               "--qps", "4,64", "--bisect-steps", "2", "--jobs", "1", "--quiet",
               "--out", str(tmp_path)])
    assert rc == 0
    body = json.loads((tmp_path / "azure-code-qwen3-8b-tp1.json").read_text())
    assert body["stamp"]["command"].startswith("benchmark.capacity --trace azure-code")
    assert "--out" not in body["stamp"]["command"] and str(tmp_path) not in json.dumps(body)
    assert body["config"]["requests"] == 60 and set(body["policies"]) == {"duet",
                                                                          "sglang-chunked"}
    for r in body["policies"].values():
        qs = [p["qps"] for p in r["points"]]
        assert qs == sorted(qs) and {4.0, 64.0} <= set(qs)
        assert len(qs) == 2 + (0 if r["above_grid"] else 2)
    assert (tmp_path / "azure-code-qwen3-8b-tp1.png").stat().st_size > 1000
    md = (tmp_path / "README.md").read_text()
    assert "| duet |" in md and "capacity (req/s)" in md


def test_bad_policy_exits_2(tmp_path, capsys):
    assert main(["--policies", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown policy 'nope'" in capsys.readouterr().err


def test_set_overrides_the_simulator_and_names_the_files(tmp_path):
    rc = main(["--trace", "azure-code", "--policies", "dynamo", "--requests", "40",
               "--qps", "4", "--bisect-steps", "0", "--jobs", "1", "--quiet",
               "--set", "kv_xfer_gbps=450", "--out", str(tmp_path)])
    assert rc == 0
    body = json.loads((tmp_path / "azure-code-qwen3-8b-tp1-kv_xfer_gbps450.json").read_text())
    assert body["config"]["sim_overrides"] == {"kv_xfer_gbps": 450.0}
    assert main(["--set", "nope=1", "--out", str(tmp_path)]) == 2
