"""The per-request front end (sim/frontend.py): a FIFO intake server per replica and token
delivery behind its backlog."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sim_helpers import make_workload, pred, run

from sglang_duet.sim.frontend import COSTS_PATH, FrontEnd, FrontEndCost, frontend_cost

REL = 1e-9


def _costs(tmp_path, serial: float, latency: float, per_token: float = 0.0) -> str:
    path = tmp_path / "fe.json"
    path.write_text(json.dumps({"systems": {s: {"serial_s": serial, "per_token_s": per_token,
                                                "latency_s": latency}
                                            for s in ("sglang", "vllm")}}))
    return str(path)


def test_intake_is_one_fifo_server_per_replica():
    fe = FrontEnd(FrontEndCost(0.010), 2)
    assert [fe.intake(0, t) for t in (0.0, 0.0, 0.05)] == pytest.approx([0.01, 0.02, 0.06])
    assert fe.intake(1, 0.0) == pytest.approx(0.01)  # the other replica's server is idle
    assert fe.next_ready(0) == pytest.approx(0.01)
    fe.handed_over(0)
    assert fe.next_ready(0) == pytest.approx(0.02)
    assert fe.next_ready(1) == pytest.approx(0.01)


def test_delivery_waits_for_the_intake_backlog():
    fe = FrontEnd(FrontEndCost(0.010, 0.0, 0.002), 1)
    for t in (0.0, 0.0, 0.0, 0.5):
        fe.intake(0, t)  # intake busy until 0.03, then 0.5 -> 0.51
    bs, be = fe.busy_periods(0)
    assert bs == pytest.approx([0.0, 0.5]) and be == pytest.approx([0.03, 0.51])
    t = np.array([0.6, 0.015, 0.04, 0.505])  # any order
    # 0.015 waits for the t=0 backlog (0.03); 0.04 and 0.6 find it idle; 0.505 waits to 0.51
    assert fe.deliver(0, t) == pytest.approx([0.602, 0.032, 0.042, 0.512])
    assert FrontEnd(FrontEndCost(0.01, 0.0, 0.002), 1).deliver(0, np.array([1.0])) == \
        pytest.approx([1.002])


def test_streaming_is_one_token_after_another_around_intake():
    fe = FrontEnd(FrontEndCost(0.010, 0.004, 0.0), 1)
    fe.intake(0, 0.103)  # intake busy 0.103 -> 0.113
    t = np.array([0.1, 0.1, 0.1, 0.2])
    # tokens at 0.1 take 4 ms each: the first runs 3 ms, waits out intake (to 0.113), ends at
    # 0.114; then 0.118, 0.122; the 0.2 token finds the process idle
    assert fe.deliver(0, t) == pytest.approx([0.114, 0.118, 0.122, 0.204])


def test_committed_costs_load_and_bad_input_is_named(tmp_path):
    for system in ("sglang", "vllm"):
        cost = frontend_cost(system, COSTS_PATH)
        assert cost.serial_s >= 0 and cost.latency_s >= 0
    with pytest.raises(ValueError, match="no front-end cost"):
        frontend_cost("tgi", COSTS_PATH)
    with pytest.raises(ValueError, match=">= 0"):
        FrontEndCost(-1.0)
    with pytest.raises(ValueError, match=">= 0"):
        FrontEndCost(0.0, -1e-3)


def test_one_request_pays_intake_and_delivery(tmp_path):
    path = _costs(tmp_path, 0.004, 0.003)
    res, m = run(make_workload([0.0], [100], [2]), "sglang-chunked", gpus=1,
                 frontend_costs=path)
    t1 = 0.004 + pred([100], [0])
    assert res.requests[0].first_token_s == pytest.approx(t1, rel=REL)  # scheduler side
    assert m["ttft_p50_ms"] == pytest.approx((t1 + 0.003) * 1e3, abs=1e-4)  # client side
    off, m_off = run(make_workload([0.0], [100], [2]), "sglang-chunked", gpus=1,
                     frontend=False)
    assert m_off["ttft_p50_ms"] == pytest.approx(pred([100], [0]) * 1e3, abs=1e-4)


def test_a_burst_of_tiny_requests_is_front_end_bound(tmp_path):
    n, serial = 200, 0.005
    w = make_workload([0.0] * n, [16] * n, [1] * n)
    _, m = run(w, "vllm-chunked", gpus=1, frontend_costs=_costs(tmp_path, serial, 0.0))
    _, m_off = run(w, "vllm-chunked", gpus=1, frontend=False)
    assert m["throughput_rps"] <= 1.0 / serial * 1.0001
    assert m["throughput_rps"] < 0.5 * m_off["throughput_rps"]
    # a request's first token cannot leave before the intake backlog ahead of it is done
    assert m["ttft_p50_ms"] >= 0.5 * n * serial * 1e3


def test_many_streams_are_capped_by_the_streaming_cost(tmp_path):
    n, per_token = 64, 0.002  # 500 tokens/s at most through one front end
    w = make_workload([0.0] * n, [32] * n, [20] * n)
    _, m = run(w, "sglang-chunked", gpus=1, frontend_costs=_costs(tmp_path, 0.0, 0.0, per_token))
    assert m["output_tps"] <= 1.0 / per_token * 1.0001
    assert m["duration_s"] >= n * 20 * per_token - 1e-9


def test_workers_take_every_nth_request_and_queue_apart():
    fe = FrontEnd(FrontEndCost(0.010), 2, workers=2)
    assert [fe.next_server(0), fe.next_server(1)] == [0, 2]
    # four at once into replica 0: servers 0, 1, 0, 1, so two finish at each 10 ms
    got = [fe.intake(0, 0.0) for _ in range(4)]
    assert got == pytest.approx([0.01, 0.01, 0.02, 0.02])
    assert fe.next_server(0) == 0 and fe.intake(1, 0.0) == pytest.approx(0.01)
    assert fe.next_server(1) == 3
    # what ready_times predicts for one replica is what intake gives, request by request
    arrivals = [0.0, 0.001, 0.002, 0.0025, 0.05, 0.051]
    fresh = FrontEnd(FrontEndCost(0.010), 1, workers=3)
    assert fresh.ready_times(arrivals) == pytest.approx([fresh.intake(0, a) for a in arrivals])
    with pytest.raises(ValueError, match="workers must be >= 1"):
        FrontEnd(FrontEndCost(0.01), 1, workers=0)


def test_requests_reach_the_scheduler_in_arrival_order_across_workers():
    """A later request on a worker idle sooner does not pass an earlier one: with every k-th
    request on worker k mod N and one intake time, ready times never decrease."""
    fe = FrontEnd(FrontEndCost(0.010), 1, workers=2)
    fe.intake(0, 0.0)  # server 0 until 0.010
    fe.intake(0, 0.0)  # server 1 until 0.010
    fe.intake(0, 0.0)  # server 0 until 0.020
    assert fe.intake(0, 0.015) == pytest.approx(0.025)  # server 1, idle since 0.010
    fe.intake(0, 0.016)  # server 0, busy until 0.020: ready 0.030
    order = []
    while fe.next_ready(0) != float("inf"):
        order.append(fe.next_ready(0))
        fe.handed_over(0)
    assert order == pytest.approx([0.01, 0.01, 0.02, 0.025, 0.03])
    arrivals = np.sort(np.random.default_rng(0).exponential(0.004, 500).cumsum())
    for workers in (2, 3, 5):
        fe = FrontEnd(FrontEndCost(0.010), 1, workers=workers)
        ready = [fe.intake(0, float(a)) for a in arrivals]
        assert all(b >= a for a, b in zip(ready, ready[1:], strict=False))


def test_each_worker_streams_its_own_requests_tokens(tmp_path):
    """Tokens stream through the server a request entered by: with two workers, two streams
    of 10 tokens leave in parallel, not one after the other (20 ms a token: far slower than
    decoding, so the streams, not the GPU, set the pace)."""
    per_token = 0.02
    w = make_workload([0.0, 0.0], [32, 32], [10, 10])
    path = _costs(tmp_path, 0.0, 0.0, per_token)
    one, m1 = run(w, "sglang-chunked", gpus=1, frontend_costs=path)
    two, m2 = run(w, "sglang-chunked", gpus=1, frontend_costs=path, frontend_workers=2)
    assert [r.server for r in two.requests] == [0, 1] and [r.server for r in one.requests] == [0, 0]
    assert [r.finish_s for r in one.requests] == [r.finish_s for r in two.requests]  # scheduler
    assert m1["duration_s"] >= 20 * per_token - 1e-9
    # the last token waits behind 19 others with one process, behind its own 9 with two
    assert m1["duration_s"] - m2["duration_s"] >= 9 * per_token - 1e-9


def test_one_worker_is_the_default_and_workers_must_be_positive():
    from sglang_duet.sim import SimConfig

    assert SimConfig().frontend_workers == 1
    with pytest.raises(ValueError, match="--frontend-workers must be >= 1"):
        SimConfig(frontend_workers=0).validate()
