"""The duet router: soonest predicted first token within tau, fallbacks, cost caching."""

from __future__ import annotations

import pytest

from sglang_duet.latency import LatencyModel, get_hardware, get_model
from sglang_duet.router import ReplicaLoad, RouterContext, make_router


@pytest.fixture(scope="module")
def ctx():
    lm = LatencyModel(get_hardware("h100-sxm"), get_model("qwen3-8b"))
    return RouterContext(latency=lm, tbt_slo_s=0.1, token_budget=8192)


def _load(i, t=1.0, **kw):
    kw.setdefault("capacity_tokens", 400_000)
    return ReplicaLoad(replica=i, timestamp=t, **kw)


def test_missing_report_falls_back_to_least_queued(ctx):
    r = make_router("duet", 2, ctx)
    r.observe([_load(0, queued_tokens=900)], now=0.0)
    d = r.pick(100)
    assert d.replica == 1 and "no load report" in d.reason


def test_heavy_decode_load_outweighs_a_few_queued_tokens(ctx):
    """Replica 0: 200 long decodes and nothing queued; replica 1: idle but 2000 tokens queued.
    Least-tokens sends to 0; under 0's decode load a prompt takes longer there."""
    loads = [_load(0, running=200, context_tokens=200 * 30_000),
             _load(1, queued_tokens=2000)]
    lt = make_router("least-tokens", 2, ctx)
    lt.observe(loads, now=0.0)
    assert lt.pick(4000).replica == 0
    r = make_router("duet", 2, ctx)
    r.observe(loads, now=0.0)
    d = r.pick(4000)
    assert d.replica == 1
    assert d.load_s is not None and d.load_s > 0
    loads_s = r.predicted_loads()
    assert loads_s[1] > 0  # the request just sent is queued work there


def test_wait_grows_with_queued_tokens(ctx):
    """Replica 1 has over a second more prompt work queued: the request goes to 0 out of turn;
    with the waits within the slack, replicas take turns."""
    from sglang_duet.router.duet import RR_SLACK_S

    r = make_router("duet", 2, ctx)
    r.observe([_load(0, queued_tokens=10_000), _load(1, queued_tokens=60_000)], now=0.0)
    first, second = r.pick(2000), r.pick(2000)
    assert first.replica == second.replica == 0 and "out of turn" in second.reason
    assert second.load_s > first.load_s
    near = make_router("duet", 2, ctx)
    near.observe([_load(0, queued_tokens=30_000), _load(1, queued_tokens=40_000)], now=0.0)
    picks = [near.pick(500) for _ in range(4)]
    assert [d.replica for d in picks] == [0, 1, 0, 1]
    assert picks[1].load_s - picks[0].load_s < RR_SLACK_S


def test_equal_replicas_take_turns(ctx):
    """Within the slack the router goes round: arrivals spread evenly, not bunched on the
    soonest first token."""
    r = make_router("duet", 3, ctx)
    r.observe([_load(0, queued_tokens=1000), _load(1), _load(2, queued_tokens=2000)], now=0.0)
    picks = [r.pick(500) for _ in range(6)]
    assert [d.replica for d in picks] == [0, 1, 2, 0, 1, 2]
    assert all("in turn" in d.reason for d in picks)


def test_tie_goes_to_fewer_queued_tokens_then_index(ctx):
    r = make_router("duet", 3, ctx)
    r.observe([_load(i) for i in range(3)], now=0.0)
    assert [r.pick(100).replica for _ in range(3)] == [0, 1, 2]


def test_replica_over_tau_is_a_last_resort(ctx):
    # 256 decodes of 100k tokens each: one more decode step is far beyond 100 ms
    over = _load(0, running=256, context_tokens=256 * 100_000, capacity_tokens=0)
    r = make_router("duet", 2, ctx)
    r.observe([over, _load(1, queued_tokens=60_000)], now=0.0)
    assert r.pick(10).replica == 1
    r2 = make_router("duet", 1, ctx)
    r2.observe([over], now=0.0)
    assert "over tau" in r2.pick(10).reason


def test_kv_pool_full_is_avoided(ctx):
    r = make_router("duet", 2, ctx)
    r.observe([_load(0, context_tokens=99_000, capacity_tokens=100_000),
               _load(1, running=64, context_tokens=64 * 2000, queued_tokens=30_000)], now=0.0)
    assert r.pick(5000).replica == 1


def test_dead_replica_is_skipped(ctx):
    r = make_router("duet", 2, ctx)
    r.observe([_load(0), _load(1, queued_tokens=50_000)], now=0.0)
    r.set_alive(0, False, "socket closed")
    assert r.pick(10).replica == 1


def test_within_tau_the_soonest_first_token_wins():
    """With a 512-token budget a mixed iteration stays within tau: the replica that would
    prefill the request soonest gets it, even if it decodes more requests."""
    lm = LatencyModel(get_hardware("h100-sxm"), get_model("qwen3-8b"))
    r = make_router("duet", 2, RouterContext(latency=lm, tbt_slo_s=0.1, token_budget=512))
    r.observe([_load(0, running=16, context_tokens=16 * 1000),
               _load(1, queued_tokens=3000)], now=0.0)
    d = r.pick(1000)
    assert d.replica == 0 and "<= tau" in d.reason
    assert d.load_s < r.predicted_loads()[1]


def _with_order(ctx, order, **kw):
    """``ctx`` with the replicas' admission order (the runtime's `build_admission`)."""
    import dataclasses

    from sglang_duet.args import DuetArgs
    from sglang_duet.runtime.components import build_admission

    return dataclasses.replace(ctx, admission=build_admission(DuetArgs(admission=order, **kw),
                                                              ctx.latency))


def test_the_wait_follows_the_replicas_admission_order(ctx):
    """#48: replica 0 has two long prompts queued (100K tokens), replica 1 nothing. In arrival
    order a short request there would wait for both: the router sends it to 1, out of turn.
    Under sjf the replica prefills the short one first: its wait on replica 0 is its own
    prefill, so replica 0 keeps its turn."""
    loads = [_load(0, waiting=2, queued_tokens=100_000), _load(1)]
    picked = {}
    for order in ("fcfs", "sjf"):
        r = make_router("duet", 2, _with_order(ctx, order))
        r.observe(loads, now=0.0)
        picked[order] = r.pick(500)
    assert picked["fcfs"].replica == 1 and "out of turn" in picked["fcfs"].reason
    assert picked["sjf"].replica == 0 and "in turn" in picked["sjf"].reason
    plain = make_router("duet", 2, ctx)  # no admission given: arrival order, as fcfs
    plain.observe(loads, now=0.0)
    assert plain.pick(500) == picked["fcfs"]


@pytest.mark.parametrize("order, prompt, ahead", [
    ("fcfs", 500, 100_000),
    ("sjf", 500, 0),          # shorter than the queued mean: first
    ("sjf", 60_000, 100_000),  # longer: after both
    ("deadline", 500, 100_000),  # 10 s SLO: all three make it, in arrival order
])
def test_queued_tokens_ahead_of_a_new_request(ctx, order, prompt, ahead):
    r = make_router("duet", 1, _with_order(ctx, order))
    r.observe([_load(0, waiting=2, queued_tokens=100_000)], now=0.0)
    assert r._ahead_tokens(r.views[0], prompt) == ahead


def test_deadline_order_lets_a_short_request_past_queued_ones_that_miss():
    """With a 1 s TTFT SLO, four queued prompts of 30K tokens (about 1.2 s of prefill each on
    the whole device) cannot make it; Moore-Hodgson keeps the short newcomer on time and sets
    them aside: nothing is predicted ahead of it (in arrival order all 120K tokens would be)."""
    lm = LatencyModel(get_hardware("h100-sxm"), get_model("qwen3-8b"))
    base = RouterContext(latency=lm, tbt_slo_s=0.1, token_budget=8192)
    r = make_router("duet", 1, _with_order(base, "deadline", ttft_slo_ms=1000.0))
    r.observe([_load(0, waiting=4, queued_tokens=120_000)], now=0.0)
    assert r._ahead_tokens(r.views[0], 500) == 0
