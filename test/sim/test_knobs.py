"""Each system's own knobs in the simulator: duet's runtime menu, pdmux's config, Dynamo xPyD."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import latency, make_workload, run

from sglang_duet.partition.plan import graph_memory_bytes, plan_menu
from sglang_duet.policy import BatchPlan, PrefillChunk
from sglang_duet.sim import SimConfig, Simulation
from sglang_duet.sim.executor import Executor, sliced_prefill_s
from sglang_duet.sim.policies.pdmux import PdmuxPolicy


def _sim(policy, **kw):
    return Simulation(SimConfig(policy=policy, **kw), make_workload([0.0], [100], [2]))


@pytest.mark.parametrize(("backend", "n"), [("green-ctx", 6), ("green-ctx", 0),
                                            ("libsmctrl", 6)])
def test_duet_plans_with_the_runtimes_menu_and_pays_its_graph_memory(backend, n):
    sim = _sim("duet", partition_backend=backend, decode_graph_sizes=n)
    plan = plan_menu(backend, "h100-sxm", n)
    policy = sim.replicas[0].planner
    assert sim.menu == plan and policy.menu == plan.sm_menu
    assert policy.decode_host == plan.decode_host
    assert sim.replicas[0].executor.decode_host == plan.decode_host
    chunked = _sim("sglang-chunked").sizing
    lost = (chunked.num_pages - sim.sizing.num_pages) * chunked.page_size
    want = graph_memory_bytes(len(plan.graph_sizes), 256)
    assert abs(lost * chunked.kv_bytes_per_token - want) <= chunked.page_size * (
        chunked.kv_bytes_per_token)


def test_pdmux_pays_its_per_group_decode_graphs_as_duet_pays_its_own():
    """pdmux captures decode graphs once per stream group (8) instead of once: 7 captures more,
    each kept out of the KV pool by the estimate duet's partition captures are."""
    chunked = _sim("sglang-chunked").sizing
    lost = (chunked.num_pages - _sim("sglang-pdmux").sizing.num_pages) * chunked.page_size
    want = graph_memory_bytes(7, 256)
    assert abs(lost * chunked.kv_bytes_per_token - want) <= chunked.page_size * (
        chunked.kv_bytes_per_token)
    assert _sim("vllm-chunked").sizing == chunked == _sim("sglang-default").sizing


def test_smaller_partitions_reach_the_menu():
    sim = _sim("duet", partition_min_sms=8, decode_graph_sizes=0)
    assert sim.menu.decode_sizes == tuple(range(8, 125, 8))


def test_aggregated_duet_builds_no_partitions():
    assert _sim("duet", duet_mode="aggregated").sizing == _sim("sglang-chunked").sizing


def test_eager_spatial_decode_steps_pay_their_launches():
    lat = latency()
    plan = BatchPlan.spatial(("a", "b"), (PrefillChunk("p", 0, 4000),), 32, 100, 4, 0.01, 0.05)
    args = ([3000, 3000], [4000], [0], [True])
    graphs = Executor(lat, decode_host="lookahead").time_plan(plan, *args)
    eager = Executor(lat, decode_host="lookahead_eager").time_plan(plan, *args)
    extra = lat.host_seconds(True, "lookahead_eager") - lat.host_seconds(True, "lookahead")
    assert extra > 0.003  # 36 layers of launches against one graph replay
    assert eager.decode_s == pytest.approx(graphs.decode_s + extra)
    # the prefill is launched after decode step 0 (`latency.reference.start_delay`): it starts
    # that much later beside an eager step 0
    assert eager.prefill_s >= graphs.prefill_s + extra
    assert eager.prefill_s == pytest.approx(graphs.prefill_s + extra, rel=0.01)


@pytest.mark.parametrize(("divisor", "bs", "split"), [(36, 12, (104, 28)), (72, 12, (112, 20)),
                                                      (9, 3, (104, 28)), (144, 96, (88, 44))])
def test_pdmux_divisor_moves_the_group(divisor, bs, split):
    # multiplexing_mixin.adjust_stream_groups: max(1, min(6, bs * 6 // divisor))
    assert PdmuxPolicy(132, "h100-sxm", decode_bs_divisor=divisor).split_for(bs) == split


def test_pdmux_knobs_reach_the_replica():
    sim = _sim("sglang-pdmux", pdmux_decode_bs_divisor=72, pdmux_max_prefill_tokens=4096,
               pdmux_split_forward_budget=1024)
    rep = sim.replicas[0]
    assert rep.planner.decode_bs_divisor == 72 and rep.planner.max_prefill_tokens == 4096
    assert rep.token_budget == 4096 and rep.executor.split_forward_budget == 1024
    assert _sim("sglang-chunked").replicas[0].executor.split_forward_budget is None


def test_sliced_prefill_waits_for_the_decode_loop():
    # 36 layers, 65536 // 16384 = 4 per loop: 9 slices, one per 30 ms loop
    assert sliced_prefill_s(1.0, 0.03, 36, 16384, 65536) == 1.0
    assert sliced_prefill_s(0.1, 0.03, 36, 16384, 65536) == pytest.approx(8 * 0.03 + 0.1 / 9)
    assert sliced_prefill_s(0.1, 0.03, 36, 100, 65536) == 0.1  # all layers in one loop


def test_xpyd_conserves_tokens_and_moves_every_kv():
    rng = np.random.default_rng(3)
    w = make_workload(np.cumsum(rng.exponential(1 / 10, 40)), rng.integers(100, 4000, 40),
                      rng.integers(1, 60, 40))
    for x, y in [(1, 1), (1, 3), (3, 1), (2, 2)]:
        res, m = run(w, "dynamo", gpus=4, disagg_prefill=x, disagg_decode=y)
        assert m["completed"] == 40 and m["tokens_conserved"], (x, y)
        assert m["kv_transfers"] == 40
        assert len(res.replicas) == x + y and res.replica_tp == 4 // (x + y)
        used = {r.replica for r in res.requests}
        assert used <= set(range(x, x + y))  # every request ends on a decode worker


def test_faster_link_gives_earlier_first_tokens():
    w = make_workload(np.arange(20) * 0.5, [8000] * 20, [20] * 20)
    _, slow = run(w, "dynamo", kv_xfer_gbps=4.3)
    _, fast = run(w, "dynamo", kv_xfer_gbps=49.0)
    assert fast["ttft_p50_ms"] < slow["ttft_p50_ms"]


def test_xpyd_needs_a_multiple_of_workers():
    with pytest.raises(ValueError, match="multiple of 3 GPUs"):
        _sim("dynamo", gpus=4, disagg_prefill=1, disagg_decode=2)


@pytest.mark.parametrize(("policy", "own"), [("duet", "duet"), ("duet-paper", "duet"),
                                             ("vllm-chunked", "round-robin"),
                                             ("sglang-chunked", "round-robin"),
                                             ("sglang-pdmux", "round-robin"),
                                             ("dynamo", "round-robin")])
def test_each_system_runs_behind_its_own_default_router_unless_told(policy, own):
    assert _sim(policy).router.router.name == own
    assert _sim(policy, router="total-tokens").router.router.name == "total-tokens"


def test_unknown_router_lists_auto_among_the_choices():
    with pytest.raises(ValueError, match="unknown router 'random'; choices: auto, duet"):
        SimConfig(router="random").validate()
