"""Golden runs on tiny synthetic workloads whose outcome is worked out by hand below.

Expected times are built from single LatencyModel predictions of the batches each iteration must
run, so these tests pin the simulator's scheduling (which batch runs when), not the latency model.
"""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import latency, make_workload, pred, run

from sglang_duet.sim import SimConfig
from sglang_duet.sim.metrics import token_times

REL = 1e-9


def _tokens(res):
    times, owner, done = token_times(res)
    return {r.idx: times[owner == j] for j, r in enumerate(done)}


@pytest.mark.parametrize("policy", ["duet", "sglang-chunked", "vllm-chunked", "sglang-default"])
def test_one_request_alone(policy):
    # prefill of 100 tokens, then 3 decode steps over contexts 100, 101, 102
    res, m = run(make_workload([0.0], [100], [4]), policy, gpus=1)
    t1 = pred([100], [0])
    steps = [pred([1], [c]) for c in (100, 101, 102)]
    times = _tokens(res)[0]
    assert times == pytest.approx(t1 + np.cumsum([0.0, *steps]), rel=REL)
    assert m["ttft_p50_ms"] == pytest.approx(t1 * 1e3, abs=1e-4)
    assert m["completed"] == 1 and m["tokens_conserved"]


def test_long_prompt_is_chunked_by_the_budget():
    res, m = run(make_workload([0.0], [10000], [1]), "sglang-chunked", gpus=1)
    expect = pred([8192], [0], [False]) + pred([1808], [8192], [True])
    assert res.requests[0].first_token_s == pytest.approx(expect, rel=REL)
    assert res.requests[0].finish_s == res.requests[0].first_token_s
    assert m["tbt_p50_ms"] is None  # one token: no gaps


@pytest.mark.parametrize("policy", ["sglang-chunked", "duet"])
def test_two_requests_mixed_batch(policy):
    # A (1000 in, 3 out) at t=0, B (500 in, 2 out) at 1 ms, one GPU.
    # A prefills alone; then one mixed batch [A decode over 1000 | B's 500-token prompt] (well
    # under tau, so duet keeps it aggregated); then one decode step of both finishes both.
    res, _ = run(make_workload([0.0, 0.001], [1000, 500], [3, 2]), policy, gpus=1)
    t_a = pred([1000], [0])
    t_mix = pred([1, 500], [1000, 0])
    t_dec = pred([1, 1], [1001, 500])
    tok = _tokens(res)
    assert tok[0] == pytest.approx([t_a, t_a + t_mix, t_a + t_mix + t_dec], rel=REL)
    assert tok[1] == pytest.approx([t_a + t_mix, t_a + t_mix + t_dec], rel=REL)
    a, b = res.requests
    assert b.first_token_s - b.arrival_s == pytest.approx(t_a + t_mix - 0.001, rel=REL)


def test_two_requests_prefill_first():
    # SGLang default: B's prompt runs as a prefill-only batch while A's decode waits.
    res, _ = run(make_workload([0.0, 0.001], [1000, 500], [3, 2]), "sglang-default", gpus=1)
    t_a = pred([1000], [0])
    t_b = pred([500], [0])
    d1 = pred([1, 1], [1000, 500])
    d2 = pred([1], [1001])
    tok = _tokens(res)
    assert tok[0] == pytest.approx([t_a, t_a + t_b + d1, t_a + t_b + d1 + d2], rel=REL)
    assert tok[1] == pytest.approx([t_a + t_b, t_a + t_b + d1], rel=REL)
    # A's first gap spans B's whole prefill: the TBT spike SGLang-Default is known for
    assert np.diff(tok[0])[0] == pytest.approx(t_b + d1, rel=REL)


def test_round_robin_spreads_requests():
    res, _ = run(make_workload([0.0, 0.0], [1000, 1000], [2, 2]), "sglang-chunked", gpus=2)
    assert sorted(r.replica for r in res.requests) == [0, 1]
    t = pred([1000], [0])
    assert [r.first_token_s for r in res.requests] == pytest.approx([t, t], rel=REL)


def test_dynamo_adds_the_kv_transfer_before_the_first_decode():
    res, m = run(make_workload([0.0], [1000], [3]), "dynamo", gpus=2)
    lat, cfg = latency(), SimConfig()
    # NixlConnector's measured throughput and post time, not NVLink's peak (engine docstring)
    xfer = cfg.kv_xfer_setup_ms / 1e3 + 1000 * lat.model.kv_bytes_per_token / (
        cfg.kv_xfer_gbps * 1e9)
    t1 = pred([1000], [0]) + xfer
    tok = _tokens(res)[0]
    assert tok == pytest.approx([t1, t1 + pred([1], [1000]), t1 + pred([1], [1000])
                                 + pred([1], [1001])], rel=REL)
    assert m["kv_transfers"] == 1


def test_rejects_what_cannot_fit():
    from sim_helpers import mem_fraction_for

    w = make_workload([0.0, 0.1], [5000, 100], [10, 5])
    res, m = run(w, "sglang-chunked", gpus=1, mem_fraction=mem_fraction_for(2000),
                 activation_reserve_gb=0.0)
    assert m["rejected"] == 1 and m["completed"] == 1
    assert res.requests[0].rejected
