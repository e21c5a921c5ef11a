"""Running-request and CUDA-graph caps (sim/caps.py) and SGLang's retract order."""

from __future__ import annotations

from collections import deque

import pytest
from sim_helpers import latency, make_workload, pred, run

from sglang_duet.latency import get_hardware
from sglang_duet.sim import SimConfig, Simulation
from sglang_duet.sim.caps import Caps, sglang_max_running, system_caps
from sglang_duet.sim.kvcache import Flavor
from sglang_duet.sim.request import Request

REL = 1e-9


def test_sglang_default_max_running_requests():
    # KVCacheConfigurator.resolve_max_num_reqs:
    # min(max(min(tokens / ctx * 512, 4096), 2048), tokens // 2)
    assert sglang_max_running(400_000, 40960) == 4096
    assert sglang_max_running(100_000, 40960) == 2048
    assert sglang_max_running(3_000, 40960) == 1500
    assert system_caps("sglang", get_hardware("h100-sxm"), "qwen3-8b", 1, 400_000, 8192) == Caps(
        4096, 256)
    assert system_caps("sglang", get_hardware("h100-sxm"), "qwen3-8b", 4, 400_000, 8192) == Caps(
        4096, 512)


def test_vllm_default_max_num_seqs():
    assert system_caps("vllm", get_hardware("h100-sxm"), "x", 1, 10**6, 8192) == Caps(1024, 512)
    assert system_caps("vllm", get_hardware("a100-80g"), "x", 1, 10**6, 2048) == Caps(256, 512)
    assert system_caps("vllm", get_hardware("h200"), "x", 1, 10**6, 128) == Caps(128, 128)
    with pytest.raises(ValueError):
        Caps(0, 1)


def test_max_running_holds_new_requests_back():
    # three 100-token prompts at once, one output token each, room for two at a time
    w = make_workload([0.0, 0.0, 0.0], [100, 100, 100], [1, 1, 1])
    res, _ = run(w, "sglang-chunked", gpus=1, frontend=False, max_running=2)
    a, b, c = (r.first_token_s for r in res.requests)
    assert a == b == pytest.approx(pred([100, 100], [0, 0]), rel=REL)
    assert c == pytest.approx(a + pred([100], [0]), rel=REL)
    res2, _ = run(w, "sglang-chunked", gpus=1, frontend=False)
    assert [r.first_token_s for r in res2.requests] == pytest.approx(
        [pred([100] * 3, [0] * 3)] * 3, rel=REL)


def test_decode_above_the_graph_cap_pays_eager_launches():
    w = make_workload([0.0] * 3, [100] * 3, [2] * 3)
    lat = latency()
    extra = lat.host_seconds(False) - lat.host_seconds(True)
    assert extra > 0
    step = pred([1] * 3, [100] * 3)
    for cap, want in ((2, step + extra), (3, step)):
        res, _ = run(w, "sglang-chunked", gpus=1, frontend=False, graph_max_bs=cap)
        r = res.requests[0]
        assert r.finish_s - r.first_token_s == pytest.approx(want, rel=REL)


@pytest.mark.parametrize("policy,sglang_schedule,order", [
    ("sglang-default", True, ["b", "a"]),  # SGLang appends a retracted request at the back
    ("sglang-default", False, ["a", "b"]),
    ("vllm-chunked", True, ["a", "b"]),  # vLLM prepends it
])
def test_where_a_retracted_request_goes(policy, sglang_schedule, order):
    sim = Simulation(SimConfig(policy=policy, gpus=1, sglang_schedule=sglang_schedule),
                     make_workload([0.0], [10], [1]))
    rep = sim.replicas[0]
    a, b = Request(0, 0.0, 100, 10), Request(1, 0.0, 100, 10)
    a.rid, b.rid = "a", "b"
    rep.kv.alloc(7)
    a.pages, a.computed, a.gen = 7, 100, 1
    rep.running = [a]
    rep.queue = deque([b])
    rep._preempt(a)
    assert [r.rid for r in rep.queue] == order
    assert Flavor.of("sglang").retract_to_back and not Flavor.of("vllm").retract_to_back
