"""Capacity on changing traffic: the rule (changing_rule.py) on synthetic outcomes and against the
steady-state rule on a real run, and the driver (changing.py) on a known pass rule."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

import benchmark.capacity.changing as changing
from benchmark.capacity.changing_report import ratios, write_report
from benchmark.capacity.changing_rule import MIN_PHASE, judge, outcomes, timeline
from benchmark.capacity.search import Cluster, Point, Setting
from benchmark.capacity.tuning import Knob
from sglang_duet.sim import SimConfig, Simulation, fixed_workload
from sglang_duet.sim.phases import Phase, PhasedSpec
from sglang_duet.sim.steady import steady_state


def _arrays(n=1000, phases=4, span=400.0):
    arrival = np.linspace(0.0, span, n)
    phase = np.minimum((arrival / (span / phases)).astype(int), phases - 1)
    return arrival, np.full(n, 0.5), np.ones(n, bool), phase


class TestJudge:
    def test_all_met_and_flat_passes(self):
        a, t, m, ph = _arrays()
        v = judge(a, t, m, ph, 4, 10.0)
        assert v["passes"] and v["keeps_up"] and v["phases_ok"] and v["attainment"] == 1.0
        assert [r["window_requests"] for r in v["phases"]][1:3] == [250, 250]

    def test_one_failing_phase_fails_though_the_whole_passes(self):
        a, t, m, ph = _arrays()
        bad = np.flatnonzero(ph == 2)[:60]  # 60 of 250: 76% in phase 2, 94% overall
        m[bad] = False
        v = judge(a, t, m, ph, 4, 10.0)
        assert v["attainment"] >= 0.9 and v["keeps_up"]
        assert not v["phases_ok"] and not v["passes"] and v["worst_phase"] == 2

    def test_a_phase_of_a_handful_does_not_gate(self):
        a, t, m, ph = _arrays()
        few = np.flatnonzero(ph == 2)[: MIN_PHASE - 1]
        ph[ph == 2] = 1
        ph[few] = 2
        m[few] = False
        v = judge(a, t, m, ph, 4, 10.0)
        assert not v["phases"][2]["gating"] and v["phases_ok"] and v["passes"]

    def test_a_ttft_rise_is_reported_not_gating(self):
        a, t, m, ph = _arrays()
        t = 0.5 + 0.01 * a  # TTFT climbs 3.2 s across the window, every request still met
        v = judge(a, t, m, ph, 4, 10.0)
        assert v["ttft_rise_s"] > 1.0 and not v["steady_keeps_up"]
        assert v["keeps_up"] and v["passes"]

    def test_a_queue_growing_past_the_slo_fails_its_phase(self):
        a, t, m, ph = _arrays()
        grow = ph == 2
        t[grow] = 0.5 + 0.2 * (a[grow] - a[grow].min())  # 20 s behind by the phase's end
        m &= t <= 10.0
        v = judge(a, t, m, ph, 4, 10.0)
        assert v["phases"][2]["attainment"] < 0.9 and not v["passes"]

    def test_unserved_requests_cut_admissions_and_attainment(self):
        a, t, m, ph = _arrays()
        t[::10], m[::10] = -1.0, False
        v = judge(a, t, m, ph, 4, 10.0)
        assert v["admitted_ratio"] < 0.97 and not v["keeps_up"]
        assert v["phases"][1]["unserved"] == 25

    def test_equals_the_steady_state_rule_on_one_run(self):
        w = fixed_workload(2000, 50, 8.0, 300, seed=1)
        cfg = SimConfig(policy="sglang-chunked", token_budget=2048)
        res = Simulation(cfg, w, "sglang-chunked").run()
        o = outcomes(res, 0.1, 10.0)
        v = judge(w.arrival_s, np.array(o["ttft"]), np.array(o["met"], bool),
                  np.zeros(len(w), int), 1, 10.0)
        s = steady_state(res, 0.1, 10.0)
        assert v["attainment"] == s["attainment"] and v["steady_keeps_up"] == s["keeps_up"]
        assert v["admitted_ratio"] == s["admitted_ratio"]
        assert v["ttft_rise_s"] == pytest.approx(s["ttft_rise_s"], abs=2e-4)


def test_timeline_bins():
    a = np.array([1.0, 2.0, 12.0, 25.0, 29.0])
    m = np.array([True, False, True, False, False])
    assert timeline(a, m, 10.0, 40.0) == [0.5, 1.0, 0.0, None]


# ---- the driver on a known pass rule -------------------------------------------------------------
SP = PhasedSpec("t", (Phase(60.0, (1.0, 1.0), (("azure-conv", 1.0),)),
                      Phase(60.0, (1.0, 1.0), (("mooncake", 1.0),))),
                (("azure-conv", 40.0), ("mooncake", 1.7)))
BEST = {"azure-code": Setting("p", (("token_budget", 1536),)),
        "azure-conv": Setting("p", (("token_budget", 1536),)),
        "mooncake": Setting("p", (("token_budget", 512),))}


def _fake(limits: dict, long_factor: float = 1.0, fresh_factor: float = 1.0):
    """A run_point whose runs pass up to ``limits[setting]`` (the oracle: the mean of its
    phases' best limits, x ``fresh_factor``), ``long_factor`` times that over the profile
    played twice."""
    calls = []

    def run_point(cl, sp, system, scale):
        calls.append((system, round(scale, 4)))
        lim = (limits[system] if isinstance(system, Setting) else fresh_factor * sum(
            max(limits[s] for s in alts) for alts in system) / len(system))
        lim *= long_factor if len(sp.phases) > len(SP.phases) else 1.0
        ok = scale <= lim
        steady = {"passes": ok, "keeps_up": ok, "phases_ok": ok, "attainment": 1.0 if ok else 0.5,
                  "offered_rps": 10 * scale, "timeline": [1.0], "phases": []}
        return Point(round(scale, 4), 100, {"steady": steady})

    return run_point, calls


def test_candidates_and_oracle_settings():
    c = changing.candidates("p", BEST)
    assert c == [Setting("p"), BEST["azure-code"], BEST["mooncake"]]
    assert changing.oracle_settings(SP, BEST) == ((BEST["azure-conv"],), (BEST["mooncake"],))
    tuned = BEST["azure-code"]  # the same knobs as azure-conv's: offered once
    assert changing.oracle_settings(SP, BEST, tuned) == ((tuned,), (BEST["mooncake"], tuned))


def test_per_trace_best_reads_the_committed_sweeps():
    best = changing.per_trace_best("sglang-chunked")
    assert set(best) == {"azure-code", "azure-conv", "mooncake"}
    assert all(s.policy == "sglang-chunked" for s in best.values())


@pytest.mark.parametrize("long_factor", [1.0, 0.8])
def test_sweep_system_picks_the_best_static_setting(monkeypatch, long_factor):
    limits = {Setting("p"): 0.5, BEST["azure-code"]: 1.3, BEST["mooncake"]: 0.9}
    fake, calls = _fake(limits, long_factor)
    monkeypatch.setattr(changing, "run_point", fake)
    monkeypatch.setattr(changing, "per_trace_best", lambda policy: BEST)
    monkeypatch.setattr(changing, "_built", lambda sp, scale, seed: type(
        "B", (), {"workload": [0] * 100})())
    monkeypatch.setattr(changing, "knobs_for", lambda *a, **k: ())
    out = changing.sweep_system(Cluster("x"), SP, "p", log=lambda m: None)
    t = out["tuned_once"]
    assert t["label"] == BEST["azure-code"].label()
    assert 0.5 / 1.025 <= out["default"]["capacity_scale"] <= 0.5
    # the mooncake setting's probe fails above the best so far: never searched
    assert out["trials"][2]["capacity_scale"] is None
    if long_factor == 1.0:
        assert 1.3 / 1.025 <= t["capacity_scale"] <= 1.3 and t["run_length"]["ok"]
    else:  # the profile played twice falls by 20%: that figure is the capacity
        assert t["capacity_from"] == "2x run" and len(t["length_checked"]) == 1
        assert 1.04 / 1.03 <= t["capacity_scale"] <= 1.04
    # per phase the better of its trace's best and the tuned-once setting: 1.3 in both
    assert 1.3 / 1.03 <= out["oracle"]["capacity_scale"] <= 1.3


def test_report_tables_and_ratios(tmp_path):
    def system(d, t, o):
        rec = {"capacity_scale": t, "offered_rps": 20.0, "at_capacity": {
            "timeline": [1.0, 0.95], "phases": [{"gating": False}, {
                "gating": True, "attainment": 0.97, "ttft_p99_s": 1.2, "ttft_max_s": 3.0,
                "keeps_up": False}]}}
        return {"default": {"capacity_scale": d, "label": "defaults", "at_capacity": rec[
            "at_capacity"]}, "tuned_once": {"label": "defaults", **rec},
            "oracle": {"capacity_scale": o}}

    systems = {"duet": system(1.2, 1.2, 1.3), "dynamo": system(0.5, 1.0, 1.1)}
    assert ratios(systems)["dynamo"] == {"duet_default_over_tuned_once": 1.2,
                                         "duet_tuned_once_over_tuned_once": 1.2,
                                         "duet_default_over_oracle": 1.091}
    body = {"stamp": {"commit": "abc", "date": "d", "command": "c"},
            "config": {"workload": SP.to_dict(), "timeline_bin_s": 10.0}, "systems": systems}
    (tmp_path / "t.json").write_text(json.dumps(body))
    text = open(write_report(str(tmp_path))).read()
    assert "| dynamo | 0.500 | defaults | **1.000**" in text and "1.20x tuned once" in text
    assert "**1.200x** (target >= 1.2x: met)" in text
    assert "**1.091x** (target >= 0.95x: met)" in text
    assert "0.97 / 1.2 / 3.0 (k)" in text and "(t.png)" in text and (tmp_path / "t.png").exists()


def test_run_writes_stamped_json_and_keeps_other_systems(tmp_path, monkeypatch):
    monkeypatch.setattr(changing, "sweep_system",
                        lambda cl, sp, policy, *a, **k: {"policy": policy})
    changing.run("prefill-decode-switch", ("dynamo",), str(tmp_path), False, False)
    body = changing.run("prefill-decode-switch", ("duet",), str(tmp_path), False, False)
    assert list(body)[0] == "stamp" and set(body["stamp"]) >= {"commit", "command"}
    assert list(body["systems"]) == ["duet", "dynamo"]  # in SYSTEMS' order, both kept
    assert body["config"]["workload"]["name"] == "prefill-decode-switch"


def test_tuned_once_descends_over_the_knobs_from_the_best_candidate(monkeypatch):
    """The descent starts at the best candidate; a knob value that beats it wins, one whose
    probe fails above the best so far is recorded as failing there and never searched."""
    win = BEST["azure-code"].with_knob("router", "total-tokens")
    lose = BEST["azure-code"].with_knob("router", "total-requests")
    limits = {Setting("p"): 0.5, BEST["azure-code"]: 1.3, BEST["mooncake"]: 0.9, win: 1.6,
              lose: 1.0}
    fake, calls = _fake(limits, 1.0)
    monkeypatch.setattr(changing, "run_point", fake)
    monkeypatch.setattr(changing, "per_trace_best", lambda policy: BEST)
    monkeypatch.setattr(changing, "_built", lambda sp, scale, seed: type(
        "B", (), {"workload": [0] * 100})())
    knob = Knob("router", ({"router": "total-requests"}, {"router": "total-tokens"}))
    monkeypatch.setattr(changing, "knobs_for", lambda *a, **k: (knob,))
    out = changing.sweep_system(Cluster("x"), SP, "p", log=lambda m: None, oracle=False)
    t = out["tuned_once"]
    assert t["label"] == win.label()
    assert 1.6 / 1.025 <= t["capacity_scale"] <= 1.6
    by = {r["setting"]: r for r in out["trials"] if r.get("knob") == "router"}
    assert by[lose.label()]["capacity_scale"] is None and by[lose.label()]["fails_at_scale"]
    assert by[win.label()]["capacity_scale"] > 1.3


def test_the_oracle_serves_each_phase_with_the_setting_that_meets_more(monkeypatch):
    a, b = Setting("p", (("token_budget", 512),)), Setting("p", (("token_budget", 1536),))
    workload = type("W", (), {"arrival_s": np.arange(4.0), "__len__": lambda self: 4})()
    ph = SimpleNamespace(workload=workload, phase=np.array([0, 0, 1, 1]))
    met = {(a, 0): [True, False], (b, 0): [True, True], (a, 1): [True, True],
           (b, 1): [True, True]}  # phase 0: b serves more; phase 1: a tie, the first wins
    monkeypatch.setattr(changing, "_built", lambda sp, scale, seed: ph)
    monkeypatch.setattr(changing, "_outcomes", lambda cl, sp, s, scale, part: {
        "ttft": [1.0, 1.0], "met": np.array(met[(s, part)])})
    seen = {}

    def fake_judge(arrival, ttft, met, *rest):
        seen["met"] = met.tolist()
        return {"passes": True}

    monkeypatch.setattr(changing, "judge", fake_judge)
    p = changing.run_point(Cluster("x"), SP, ((a, b), (a, b)), 1.0)
    assert seen["met"] == [True, True, True, True]
    assert p.metrics["steady"]["oracle_choice"] == [b.label(), a.label()]


def test_the_oracle_never_serves_less_than_not_switching(monkeypatch):
    """Where a fresh cluster per phase costs more than re-tuning gains, the oracle keeps the
    tuned-once setting throughout: its figure is the tuned-once one, the switching one kept."""
    limits = {Setting("p"): 0.5, BEST["azure-code"]: 1.3, BEST["mooncake"]: 0.9}
    fake, _ = _fake(limits, fresh_factor=0.8)
    monkeypatch.setattr(changing, "run_point", fake)
    o = changing.oracle_of(Cluster("x"), SP, BEST["azure-code"], 1.29, BEST, log=lambda m: None)
    assert o["capacity_scale"] == 1.29 and o["capacity_from"] == "tuned once (no switch)"
    assert 1.04 / 1.03 <= o["switching_scale"] <= 1.04  # 0.8 x 1.3
