"""The router benchmark on the steady-state rule: its searches and its table (fake runs)."""

from __future__ import annotations

import json

import benchmark.capacity.search as search
import benchmark.capacity.sweep as sweep
from benchmark.capacity.search import Point
from benchmark.router import capacity as rc
from benchmark.router.report import write_markdown


def _fake(limits):
    def evaluate(cl, s, qps, requests):
        # duet behind the router under test; a baseline by its policy (its router is pinned)
        lim = limits[cl.base["router"] if s.policy == "duet" else s.policy]
        ok = qps <= lim
        st = {"keeps_up": ok, "attainment": 1.0 if ok else 0.2, "served_ratio": 1.0,
              "admitted_ratio": 1.0,
              "ttft_rise_s": 0.0, "sarathi_ok": ok, "served_rps": min(qps, lim)}
        return Point(round(qps, 4), requests, {"steady": st})
    return evaluate


def test_router_and_baseline_capacities_and_the_table(monkeypatch, tmp_path):
    limits = {"duet": 50.0, "round-robin": 40.0, "sglang-chunked": 45.0, "dynamo": 20.0}
    monkeypatch.setattr(search, "evaluate", _fake(limits))
    monkeypatch.setattr(sweep, "evaluate", _fake(limits))
    setup = rc.SETUPS[2]  # qwen3-8b on 4 GPUs, TP1
    duet = rc.router_capacity(setup, "azure-code", "duet", length_check=True)
    assert 50 / 1.05 <= duet["capacity_qps"] <= 50 and duet["requests"] == 8000
    assert duet["run_length"]["requests"] == 16000 and duet["run_length"]["ok"]
    rr = rc.router_capacity(setup, "azure-code", "round-robin")
    alt = rc.baseline_capacity(setup, "azure-code", "dynamo")
    assert 20 / 1.025 <= alt["capacity_qps"] <= 20
    assert {t["knob"] for t in alt["trials"]} == {"kv_xfer_gbps", "xPyD"}
    chunked = rc.baseline_capacity(setup, "azure-code", "sglang-chunked")
    assert "router" not in {t["knob"] for t in chunked["trials"]}  # pinned to round-robin
    payload = {"stamp": {"commit": "abc123"},
               "setup": setup.__dict__, "traces": {"azure-code": {"duet": duet,
                                                                   "round-robin": rr}},
               "baselines": {"azure-code": {"dynamo": alt}}}
    (tmp_path / "capacity-x.json").write_text(json.dumps(payload))
    text = open(write_markdown(str(tmp_path))).read()
    row = next(line for line in text.splitlines() if line.startswith("| qwen3-8b-4xh100"))
    assert f"| {duet['capacity_qps'] / rr['capacity_qps']:.3f} |" in row  # vs round-robin
    assert f"{alt['capacity_qps']:.3f} ({alt['setting']})" in row
    assert row.rstrip().endswith(f"{duet['capacity_qps'] / alt['capacity_qps']:.3f} | abc123 |")


def test_a_longer_run_that_fails_lower_sets_the_router_figure(monkeypatch):
    def evaluate(cl, s, qps, requests):
        lim = 50.0 if requests <= 8000 else 40.0  # the 2x run hides no drift only below 40
        ok = qps <= lim
        st = {"keeps_up": ok, "attainment": 1.0 if ok else 0.2, "served_ratio": 1.0,
              "admitted_ratio": 1.0, "ttft_rise_s": 0.0, "sarathi_ok": ok,
              "served_rps": min(qps, lim)}
        return Point(round(qps, 4), requests, {"steady": st})
    monkeypatch.setattr(search, "evaluate", evaluate)
    duet = rc.router_capacity(rc.SETUPS[2], "azure-code", "duet", length_check=True)
    rl = duet["run_length"]
    assert not rl["ok"] and rl["sets_figure"] and 40 / 1.025 <= rl["capacity_qps"] <= 40
    assert duet["capacity_from"] == "2x run" and duet["capacity_qps"] == rl["capacity_qps"]
    assert 50 / 1.05 <= duet["short_run_qps"] <= 50


def test_the_table_compares_routers_at_one_run_length(tmp_path):
    """A duet figure the 2x run lowered is shown with its common-length figure, and the ratio
    uses the latter: the other routers were searched at that length only."""
    row = {"capacity_qps": 3.9, "capacity_from": "2x run", "short_run_qps": 4.6}
    payload = {"stamp": {"commit": "c0ffee"}, "setup": {"name": "s"},
               "traces": {"mooncake": {"duet": row, "total-tokens": {"capacity_qps": 4.0}}}}
    (tmp_path / "capacity-s.json").write_text(json.dumps(payload))
    text = open(write_markdown(str(tmp_path))).read()
    line = next(x for x in text.splitlines() if x.startswith("| s | mooncake"))
    assert "| 3.900 (2x run; 1x: 4.600) |" in line and "| 1.150 |" in line


def test_kept_alternatives_carry_their_runs_commit(tmp_path):
    from benchmark.router.__main__ import _kept_baselines

    path = tmp_path / "capacity-s.json"
    assert _kept_baselines(str(path)) is None
    base = {"mooncake": {"dynamo": {"capacity_qps": 2.0, "setting": "defaults"}}}
    path.write_text(json.dumps({"stamp": {"commit": "old1"}, "baselines": base}))
    kept = _kept_baselines(str(path))
    assert kept == {"baselines": base, "baselines_from": "old1"}
    payload = {"stamp": {"commit": "new2"}, "setup": {"name": "s"},
               "traces": {"mooncake": {"duet": {"capacity_qps": 3.0}}}, **kept}
    path.write_text(json.dumps(payload))
    line = next(x for x in open(write_markdown(str(tmp_path))).read().splitlines()
                if x.startswith("| s | mooncake"))
    assert line.endswith("| 1.500 | new2 (alternatives: old1) |")
    assert _kept_baselines(str(path))["baselines_from"] == "old1"  # carried again: still old1
