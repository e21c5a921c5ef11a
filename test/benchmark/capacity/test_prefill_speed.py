"""Prefill speed while prompts wait: the arithmetic, the recorded iterations, and what a real
run gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.capacity.prefill_speed import measure, speed_of
from benchmark.capacity.queue_bound import FcfsQueue
from benchmark.capacity.search import Cluster, Setting
from sglang_duet.sim import SimConfig, Simulation, build_arrivals, load_trace
from sglang_duet.sim.replica import ITER_KINDS

RESULTS = Path(__file__).resolve().parents[3] / "benchmark" / "results" / "capacity"
AGG, SPATIAL, DEC = (ITER_KINDS.index(k) for k in ("aggregated", "spatial", "decode_only"))


def test_speed_is_ideal_over_wall_seconds_while_prompts_wait():
    trace = [
        (1.0, 2.0, SPATIAL, 8, [(100, 0)], True, False),  # ideal 0.5 s
        (2.0, 2.5, AGG, 8, [(50, 0), (10, 90)], True, False),  # ideal 0.3 s
        (2.5, 3.5, DEC, 8, [], True, True),  # prompts wait, the pool holds them, none prefills
        (3.5, 9.0, DEC, 8, [], False, True),  # nothing waits: not counted
        (0.0, 1.0, AGG, 8, [(100, 0)], True, True),  # before the window
        (12.0, 13.0, AGG, 8, [(100, 0)], True, True),  # after it
        (9.5, 10.5, DEC, 8, [], True, False),  # counted whole, half of it in the window
    ]
    got = speed_of(trace, 1.0, 10.0, lambda ch: sum(q for q, _ in ch) / 200.0)
    assert got["pending_s"] == pytest.approx(3.0)
    assert got["speed"] == round((0.5 + 0.3) / 3.5, 4)
    assert got["held_share"] == round(1.0 / 3.5, 4)
    kinds = got["kinds"]
    assert kinds["spatial"] == {"time_share": round(1 / 3.5, 4), "speed": 0.5}
    assert kinds["aggregated"] == {"time_share": round(0.5 / 3.5, 4), "speed": 0.6}
    assert kinds["decode_only"] == {"time_share": round(2 / 3.5, 4), "speed": 0.0}
    assert speed_of(trace[3:4], 0.0, 10.0, lambda ch: 1.0)["speed"] is None


def _run(trace: bool):
    cfg = SimConfig(trace="mooncake", policy="duet", qps=1.5, num_requests=300)
    sim = Simulation(cfg, build_arrivals(load_trace("mooncake"), 1.5, 300, 0), "duet")
    if trace:
        for rep in sim.replicas:
            rep.trace = []
    return sim.run()


def test_recording_iterations_changes_nothing_and_records_each_once():
    plain, traced = _run(False), _run(True)
    assert [(r.first_token_s, r.finish_s) for r in plain.requests] == [
        (r.first_token_s, r.finish_s) for r in traced.requests]
    for rep in plain.replicas:
        assert rep.trace is None
    for rep in traced.replicas:
        assert len(rep.trace) == len(rep.iter_start) > 0
        assert [t[0] for t in rep.trace] == list(rep.iter_start)
        assert all(end > start for start, end, *_ in rep.trace)
        # an iteration that prefills began with a prompt prefilling: it counts as waiting
        assert all(it[5] for it in rep.trace if it[4])
        assert not all(it[5] for it in rep.trace)  # and the drain at the end does not
        prefilled = sum(q for it in rep.trace for q, _ in it[4])
        done = [r for r in traced.requests if r.replica == rep.idx]
        # every prompt token not served from the prefix cache is prefilled exactly once
        assert prefilled <= sum(r.prompt_len for r in done)
        assert prefilled > 0


def test_measure_on_a_real_run():
    cl = Cluster("mooncake")
    got = measure(cl, Setting("duet"), 1.5, 400)
    assert 0.3 < got["speed"] <= 1.0
    assert sum(k["time_share"] for k in got["kinds"].values()) == pytest.approx(1.0, abs=1e-3)
    assert 0.0 < got["pending_share"] <= 1.0
    assert 0.0 <= got["held_share"] <= 1.0
    # the ideal FCFS server at that speed passes at its figure and fails 10% above it
    fcfs = FcfsQueue(cl.sim_config(Setting("duet"), 1.5, 400), 400)
    assert fcfs.passes(got["fcfs_qps"], got["speed"])
    assert not fcfs.passes(got["fcfs_qps"] * 1.1, got["speed"])


def test_committed_speeds_are_within_the_bound():
    with open(RESULTS / "prefill_speed.json") as f:
        cases = json.load(f)["cases"]
    assert len(cases) == 6
    for pols in cases.values():
        assert "duet" in pols and len(pols) == 2
        for row in pols.values():
            assert 0.3 < row["speed"] <= 1.0
            assert 0.0 <= row["held_share"] < 0.5
            assert row["qps"] <= row["fcfs_qps"] * 1.02  # no policy beats the ideal server
