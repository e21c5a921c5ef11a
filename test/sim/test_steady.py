"""sim.steady: a run that keeps up is told from one whose queue grows."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import make_workload

from sglang_duet.sim import SimConfig, build_arrivals, load_trace, simulate
from sglang_duet.sim.steady import steady_state


def _steady(policy, qps, n=600, trace="azure-code", **kw):
    cfg = SimConfig(policy=policy, qps=qps, num_requests=n, trace=trace, **kw)
    res = simulate(cfg, build_arrivals(load_trace(trace), qps, n, 0))
    return res, steady_state(res, 0.1, 10.0)


def test_light_load_keeps_up_and_meets_the_slos():
    res, s = _steady("sglang-chunked", 4.0, token_budget=2048)
    assert s["keeps_up"] and s["attainment"] == 1.0 and s["sarathi_ok"]
    assert 0.97 <= s["served_ratio"] <= 1.03 and 0.97 <= s["admitted_ratio"] <= 1.03
    assert s["offered_rps"] == pytest.approx(4.0, rel=0.15)
    assert s["window_requests"] == 480  # requests 60 .. 539 of 600
    assert all(r.sched_s >= r.arrival_s for r in res.requests)
    assert 0.0 <= s["sched_delay_p50_s"] <= s["sched_delay_p99_s"]


def test_overload_does_not_keep_up():
    res, s = _steady("sglang-chunked", 60.0, n=800, token_budget=2048)
    assert not s["keeps_up"]
    assert s["admitted_ratio"] < 0.97 or s["ttft_rise_s"] > 1.0
    assert s["ttft_rise_s"] > 1.0  # the queue grows across the window
    assert not s["sarathi_ok"]


def test_the_window_leaves_out_warm_up_and_drain():
    # 10 requests: the window is requests 1 .. 8 by arrival
    w = make_workload(np.arange(10.0), [100] * 10, [4] * 10)
    res = simulate(SimConfig(policy="sglang-chunked"), w)
    s = steady_state(res, 0.1, 10.0)
    assert s["window_s"] == [1.0, 8.0] and s["window_requests"] == 8
    assert s["offered_rps"] == pytest.approx(8 / 7.0, abs=1e-4)


def test_a_rejected_request_is_a_miss():
    w = make_workload(np.arange(10.0), [100] * 4 + [10**7] + [100] * 5, [4] * 10)
    res = simulate(SimConfig(policy="sglang-chunked"), w)
    assert steady_state(res, 0.1, 10.0)["attainment"] == pytest.approx(7 / 8)


def test_too_short_a_run_has_no_window():
    w = make_workload([0.0, 0.0], [10, 10], [2, 2])
    with pytest.raises(ValueError, match="span no time"):
        steady_state(simulate(SimConfig(policy="sglang-chunked"), w), 0.1, 10.0)


def test_the_client_sees_the_front_end():
    _, on = _steady("sglang-chunked", 4.0, n=300, token_budget=2048)
    _, off = _steady("sglang-chunked", 4.0, n=300, token_budget=2048, frontend=False)
    assert on["ttft_mean_s"] > off["ttft_mean_s"]  # intake and delivery come on top


def test_a_ramping_in_service_population_is_not_a_growing_queue():
    # light load, long outputs: the first requests are still decoding when the window ends, so
    # few completions fall inside it, but every request gets its first token at once
    n = 100
    w = make_workload(np.arange(n) * 0.2, [200] * n, [3000] * n)
    res = simulate(SimConfig(policy="sglang-chunked", token_budget=2048), w)
    s = steady_state(res, 0.1, 10.0)
    assert s["served_ratio"] < 0.5  # completions lag: the in-service ramp
    assert s["admitted_ratio"] >= 0.97 and abs(s["ttft_rise_s"]) < 0.5
    assert s["keeps_up"]


@pytest.mark.parametrize("frontend", [True, False])
def test_miss_causes_add_up_to_the_window_and_match_attainment(frontend):
    """Every window request falls in one cause; ``met`` over the window is the attainment; a
    run without the front end has no client-only TBT misses; one under a TBT SLO below its
    steps misses TBT at the server."""
    from sglang_duet.sim.steady import miss_causes

    cfg = SimConfig(policy="sglang-chunked", qps=12.0, num_requests=500, trace="azure-code",
                    token_budget=8192, frontend=frontend)
    res = simulate(cfg, build_arrivals(load_trace("azure-code"), 12.0, 500, 0))
    for tau in (0.1, 0.02):
        m = miss_causes(res, tau, 10.0)
        assert sum(v for k, v in m.items() if k != "window") == m["window"] == 400
        s = steady_state(res, tau, 10.0)
        assert m["met"] / m["window"] == pytest.approx(s["attainment"], abs=1e-4)
        if not frontend:
            assert m["tbt_client"] == 0
    assert m["tbt_server"] + m["both"] > 0  # tau = 20 ms: below a mixed 8K-token step


def test_a_rejected_request_is_unserved_in_miss_causes():
    from sglang_duet.sim.steady import miss_causes

    w = make_workload(np.arange(10.0), [100] * 4 + [10**7] + [100] * 5, [4] * 10)
    res = simulate(SimConfig(policy="sglang-chunked"), w)
    assert miss_causes(res, 0.1, 10.0) == {"window": 8, "met": 7, "unserved": 1, "ttft": 0,
                                           "tbt_server": 0, "tbt_client": 0, "both": 0}


def test_fairness_columns_follow_the_longest_prompts():
    """One 12K-token prompt among 100-token ones: the window's longest tenth is the long one and
    the prompts just at the 90th percentile; P99 and max TTFT are the window's, the max at least
    the long prompt's own."""
    n = 50
    lens = [100] * n
    lens[20] = 12000
    w = make_workload(np.arange(n) * 0.5, lens, [4] * n)
    res = simulate(SimConfig(policy="sglang-chunked", token_budget=512), w)
    s = steady_state(res, 0.1, 10.0)
    assert s["long_tenth_attainment"] == 1.0  # every prompt gets its first token in time here
    s_tight = steady_state(res, 0.1, 1e-4)
    assert s_tight["long_tenth_attainment"] == 0.0
    long_req = next(r for r in res.requests if r.prompt_len == 12000)
    assert s["ttft_max_s"] >= long_req.first_token_s - long_req.arrival_s - 1e-4
    assert 0.0 < s["ttft_p99_s"] <= s["ttft_max_s"]
