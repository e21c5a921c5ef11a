"""The decision-cost benchmark's pipeline (timings themselves are not asserted: see its JSON)."""

from __future__ import annotations

import json

from benchmark.policy.decision_cost import issue_workload, main, time_inputs


def test_inputs_case_times_the_bridge_on_requests_that_round_trip():
    decodes, waiting = issue_workload()
    got = time_inputs(decodes[:16], waiting, iters=3)
    assert (got["running"], got["waiting"], got["iters"]) == (16, 8, 3)
    assert got["median_us"] > 0.0


def test_main_writes_every_case_and_the_per_iteration_sum(tmp_path):
    out = tmp_path / "dc.json"
    main(["--iters", "3", "--sim-requests", "120", "--out", str(out)])
    res = json.loads(out.read_text())
    assert len(res["medians_us"]) == len(res["cases"]) == 6
    assert set(res["admission"]) == {"steady", "churn"}
    sim = res["simulated"]
    assert sim["requests"] == 120
    assert 0 <= sim["simulator_ordered"] <= sim["iterations_with_a_queue"]
    assert res["per_iteration_median_us"] == round(
        res["inputs"]["median_us"] + res["headline_median_us"], 1)
    assert res["stamp"]["command"].endswith("--out " + str(out))
