"""Issue scenarios: Qwen3-8B on H100 by the built-in latency model."""

from __future__ import annotations

import json

import pytest

from sglang_duet.latency import Batch
from sglang_duet.policy import DuetPolicy, ReqState


def running(n: int, context: int, prefix: str = "d") -> list[ReqState]:
    # decode_context = prompt_len + generated - 1 == context
    return [ReqState(f"{prefix}{i}", context, context, 1) for i in range(n)]


def test_light_load_is_aggregated():
    pol = DuetPolicy.build("adaptive", 0.1)
    plan = pol.plan(running(4, 512), [ReqState("w0", 256, 0, 0), ReqState("w1", 300, 40, 0)])
    assert plan.mode == "aggregated"
    assert plan.predicted_total_s <= 0.1
    assert [c.length for c in plan.prefill] == [256, 260]
    assert plan.sms_decode == plan.sms_prefill == 132


def test_64_decodes_at_4k_plus_8k_prompt_goes_spatial_with_minimal_decode_partition():
    pol = DuetPolicy.build("adaptive", 0.1, scheme="paper")
    decodes = running(64, 4096)
    waiting = [ReqState("long", 8192, 0, 0)]
    plan = pol.plan(decodes, waiting)
    assert plan.mode == "spatial", plan.reason
    assert plan.predicted_decode_s <= 0.1
    assert plan.sms_prefill > plan.sms_decode  # most SMs to prefill
    # S_d is the smallest menu entry whose decode step meets tau under contention
    lat, menu = pol.latency, pol.menu
    dec = Batch([1] * 64, [4096] * 64)
    pre = Batch([c.length for c in plan.prefill], [c.start for c in plan.prefill])
    meets = [
        s
        for s in menu.decode_sizes
        if lat.predict_concurrent(dec, pre, s, 132 - s)[0].total_s <= 0.1
    ]
    assert plan.sms_decode == meets[0]
    # the mixed batch really misses tau (why spatial)
    assert lat.predict(dec.concat(pre)).total_s > 0.1
    json.dumps(plan.to_dict())


@pytest.mark.parametrize("tau", [0.03, 0.05, 0.1])
def test_mooncake_long_prompt_with_128_decodes_never_breaks_a_reachable_tau(tau):
    pol = DuetPolicy.build("adaptive", tau)
    decodes = running(128, 2048)
    waiting = [ReqState("mooncake", 32768, 0, 0)]
    plan = pol.plan(decodes, waiting)
    assert plan.mode in ("spatial", "decode_only"), plan.reason
    lat = pol.latency
    alone = lat.predict(Batch([1] * 128, [2048] * 128)).total_s
    if alone <= tau:  # a feasible plan exists (decode-only at least)
        assert plan.predicted_tbt_s <= tau, plan.reason
    assert sum(c.length for c in plan.prefill) <= 8192 - 128


def test_mooncake_prefill_progresses_through_chunks():
    """Feeding the plan's chunks back as computed tokens walks the 32K prompt to its end."""
    pol = DuetPolicy.build("adaptive", 0.1)
    decodes = running(128, 2048)
    req = ReqState("mooncake", 32768, 0, 0)
    steps = 0
    while req.computed < req.prompt_len and steps < 100:
        plan = pol.plan(decodes, [req])
        assert plan.predicted_tbt_s <= 0.1
        done = sum(c.length for c in plan.prefill)
        req = ReqState(req.rid, req.prompt_len, req.computed + done, 0)
        steps += 1
    assert req.computed == req.prompt_len


def test_tight_slo_no_feasible_split_falls_back_to_decode_only():
    pol = DuetPolicy.build("adaptive", 0.02)
    decodes = running(64, 4096)
    plan = pol.plan(decodes, [ReqState("w", 8192, 0, 0)])
    alone = pol.latency.predict(Batch([1] * 64, [4096] * 64)).total_s
    assert plan.mode == "decode_only"
    assert plan.predicted_decode_s == pytest.approx(alone)
    if alone > 0.02:
        assert "nothing meets tau" in plan.reason or "nothing keeps the gap" in plan.reason


def test_gap_scheme_covers_the_prefill_with_lookahead_steps():
    """64 decodes at 4K + an 8K prompt: the decodes keep producing tokens through the prefill,
    so the boundary gap t_p - (k - 1) * t_d stays within tau; the paper's scheme does not."""
    decodes, waiting = running(64, 4096), [ReqState("long", 8192, 0, 0)]
    gap = DuetPolicy.build("adaptive", 0.1).plan(decodes, waiting)
    paper = DuetPolicy.build("adaptive", 0.1, scheme="paper").plan(decodes, waiting)
    for plan in (gap, paper):
        assert plan.mode == "spatial" and plan.predicted_decode_s <= 0.1

    def boundary(p):
        return p.predicted_prefill_s - (p.lookahead - 1) * p.predicted_decode_s

    assert boundary(gap) <= 0.1 < boundary(paper)
    assert gap.sms_prefill > gap.sms_decode


def test_gap_scheme_carries_the_tail_into_the_next_plan():
    """After a spatial plan whose prefill outlasts its k steps, the next plan's first step must
    fit in what is left of tau: a mixed batch that alone meets tau no longer does."""
    pol = DuetPolicy.build("adaptive", 0.1, max_lookahead=2)  # too few steps to cover it
    spatial = pol.plan(running(64, 4096), [ReqState("long", 8192, 0, 0)])
    tail = spatial.predicted_prefill_s - spatial.lookahead * spatial.predicted_decode_s
    assert tail > 0.0
    # a mixed batch between 0.1 - tail and 0.1 s: aggregated on its own
    small = None
    for n in range(256, 8192, 4):
        cand = (running(4, 512), [ReqState("w", n, 0, 0)])
        plan = DuetPolicy.build("adaptive", 0.1).plan(*cand)
        if plan.mode == "aggregated" and plan.predicted_total_s > 0.1 - tail:
            small = cand
            break
    assert small is not None
    pol.observe(spatial, spatial.predicted_total_s)
    assert pol._carry_s == pytest.approx(tail)
    after = pol.plan(*small)
    whole = small[1][0].prompt_len
    if after.mode == "aggregated":  # the mixed batch sized down to what the tail leaves
        assert after.predicted_total_s <= 0.1 - tail + 1e-9
        assert sum(c.length for c in after.prefill) < whole
    pol.observe(after, after.predicted_total_s)  # no tail left: the whole batch again
    again = pol.plan(*small)
    assert again.mode == "aggregated" and sum(c.length for c in again.prefill) == whole


def test_backlog_plans_faster_decode_steps_within_the_same_gap_bound():
    """With prompt work queued beyond this iteration, the gap scheme sizes the decode step for
    half of tau when a split allows it (decodes finish and free KV sooner)."""
    decodes, waiting = running(64, 4096), [ReqState("long", 8192, 0, 0)]
    pols = [DuetPolicy.build("adaptive", 0.1) for _ in range(2)]
    for pol in pols:
        pol.sized = False  # the split under backlog is under test
        pol.backlog_share = 0.5
    calm = pols[0].plan(decodes, waiting)
    busy = pols[1].plan(decodes, waiting, backlog=True)
    assert calm.mode == busy.mode == "spatial"
    assert calm.predicted_decode_s > 0.05 >= busy.predicted_decode_s
    assert busy.sms_decode > calm.sms_decode
    assert busy.predicted_prefill_s - (busy.lookahead - 1) * busy.predicted_decode_s <= 0.1
    paper = DuetPolicy.build("adaptive", 0.1, scheme="paper")
    assert paper.plan(decodes, waiting, backlog=True) == paper.plan(decodes, waiting)


def test_backlog_target_binds_the_mixed_batches_too():
    """Under backlog every option aims at backlog_share * tau: a mixed batch that meets tau
    but not the target is not taken whole (sized to the target, or split)."""
    decodes, waiting = running(32, 1024), [ReqState("w", 2048, 0, 0)]
    calm = DuetPolicy.build("adaptive", 0.1).plan(decodes, waiting)
    assert calm.mode == "aggregated" and 0.05 < calm.predicted_total_s <= 0.1, calm.reason
    pol = DuetPolicy.build("adaptive", 0.1)
    pol.backlog_share = 0.5
    busy = pol.plan(decodes, waiting, backlog=True)
    if busy.mode == "aggregated":
        assert busy.predicted_total_s <= 0.05 and len(busy.prefill) == 1
        assert busy.prefill[0].length < 2048
    else:
        assert busy.mode == "spatial" and busy.predicted_decode_s <= 0.1, busy.reason
    # share 1 (the default): the backlog changes nothing
    assert DuetPolicy.build("adaptive", 0.1).plan(decodes, waiting, backlog=True) == calm


def test_a_missed_backlog_target_is_relaxed_in_steps_not_dropped():
    """No split reaches a 10 ms decode step for 64 decodes at 4K, but one between it and tau
    does: the split keeps the tightest of the relaxed targets rather than tau's step."""
    from sglang_duet.policy.gap_optimizer import RELAX_STEPS

    decodes, waiting = running(64, 4096), [ReqState("long", 8192, 0, 0)]
    pols = [DuetPolicy.build("adaptive", 0.1) for _ in range(2)]
    for pol in pols:
        pol.sized = False
        pol.backlog_share = 0.1
    calm = pols[0].plan(decodes, waiting)
    busy = pols[1].plan(decodes, waiting, backlog=True)
    assert calm.mode == busy.mode == "spatial"
    tau = 0.1 / max(pols[1].correction.margin("spatial", "decode"),
                    pols[1].correction.margin("spatial", "prefill"))
    targets = [0.1 * tau + 0.9 * tau * j / RELAX_STEPS for j in range(RELAX_STEPS)]
    assert busy.predicted_decode_s > targets[0]  # the target itself is out of reach
    assert busy.predicted_decode_s <= max(targets) < calm.predicted_decode_s


def test_backlog_share_must_be_a_share():
    from sglang_duet.latency import LatencyModel, get_hardware, get_model

    lat = LatencyModel(get_hardware("h100-sxm"), get_model("qwen3-8b"))
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="backlog_share"):
            DuetPolicy("adaptive", 0.1, latency=lat, backlog_share=bad)
    DuetPolicy("adaptive", 0.1, latency=lat, backlog_share=0.0)  # automatic


def test_the_automatic_share_follows_the_kv_pools_occupancy():
    """By default the backlog share is 1 while the KV pool is lightly held (a queue held by the
    token budget changes nothing), falls linearly to the floor as occupancy rises, and is the
    floor while the pool holds prompts back; a fixed share ignores the pool."""
    from sglang_duet.policy import backlog as B

    decodes, waiting = running(32, 1024), [ReqState("w", 2048, 0, 0)]
    calm = DuetPolicy.build("adaptive", 0.1).plan(decodes, waiting)
    pol = DuetPolicy.build("adaptive", 0.1)
    assert pol.backlog_share == B.BACKLOG_AUTO
    assert pol.plan(decodes, waiting, backlog=True, kv_use=B.KV_LOW) == calm
    assert pol._share == 1.0
    mid = (B.KV_LOW + B.KV_HIGH) / 2
    pol.plan(decodes, waiting, backlog=True, kv_use=mid)
    assert pol._share == pytest.approx((1 + B.AUTO_FLOOR) / 2)
    busy = pol.plan(decodes, waiting, backlog=True, kv_held=True)
    assert pol._share == B.AUTO_FLOOR
    assert busy != calm  # aiming at the floor's share of tau now
    assert pol.plan(decodes, waiting, backlog=True, kv_use=0.99) == busy
    fixed = DuetPolicy.build("adaptive", 0.1)
    fixed.backlog_share = 0.5
    fixed.plan(decodes, waiting, backlog=True, kv_held=True)
    assert fixed._share == 0.5


def test_a_held_kv_pool_keeps_prefill_out_of_the_decodes_batch():
    """Light load mixes the prompt into the decodes' batch; from KV_SPLIT_AT occupancy the
    adaptive mode plans as the spatial one (with or without a backlog), and a fixed share
    keeps the mixed batch."""
    from sglang_duet.policy import backlog as B

    decodes, waiting = running(4, 512), [ReqState("w0", 256, 0, 0)]
    pol = DuetPolicy.build("adaptive", 0.1)
    below = pol.plan(decodes, waiting, kv_use=B.KV_SPLIT_AT - 0.01)
    assert below.mode == "aggregated"
    split = pol.plan(decodes, waiting, kv_use=B.KV_SPLIT_AT)
    assert split.mode == "spatial" and split.prefill == below.prefill
    assert split.sms_decode + split.sms_prefill == pol.total_sms
    forced = DuetPolicy.build("spatial", 0.1).plan(decodes, waiting)
    assert (split.sms_decode, split.lookahead) == (forced.sms_decode, forced.lookahead)
    assert pol.plan(decodes, [], kv_use=1.0).mode == "decode_only"  # nothing to split
    fixed = DuetPolicy.build("adaptive", 0.1)
    fixed.backlog_share = 1.0
    assert fixed.plan(decodes, waiting, kv_use=1.0).mode == "aggregated"


def test_auto_share_and_split_thresholds():
    from sglang_duet.policy.backlog import (
        AUTO_FLOOR,
        KV_HIGH,
        KV_LOW,
        KV_SPLIT_AT,
        auto_share,
        check_share,
        split_only,
    )

    assert auto_share(0.0) == auto_share(KV_LOW) == 1.0
    assert auto_share(KV_HIGH) == auto_share(1.0) == AUTO_FLOOR
    assert 1.0 > auto_share((KV_LOW + KV_HIGH) / 2) > AUTO_FLOOR
    assert not split_only(KV_SPLIT_AT - 1e-9) and split_only(KV_SPLIT_AT)
    assert check_share(0.0) == 0.0 and check_share(1.0) == 1.0



def test_forced_split_lets_decodes_alone_end_a_carried_wait():
    """With mixed batches off (spatial mode, or a held pool), when the last spatial plan's
    prefill outlasted its k steps by so much that no split keeps the next gap within tau, the
    decodes alone on the whole GPU end the wait (a split's first step on fewer SMs, or its
    boundary, would stretch it); once the wait is over the split comes back."""
    from sglang_duet.policy import BatchPlan

    pol = DuetPolicy.build("spatial", 0.1)
    decodes, waiting = running(64, 4096), [ReqState("long", 8192, 0, 0)]
    fresh = pol.plan(decodes, waiting)
    assert fresh.mode == "spatial"
    rids = tuple(r.rid for r in decodes)
    late = BatchPlan.spatial(rids, fresh.prefill, 66, 66, 2, 0.01, 0.1)  # 80 ms past its steps
    pol.observe(late, late.predicted_total_s)
    assert pol._carry_s == pytest.approx(0.08)
    after = pol.plan(decodes, waiting)
    assert after.mode == "decode_only" and "end the wait" in after.reason
    assert 0.08 + after.predicted_decode_s > 0.1  # nothing could keep this gap within tau
    pol.observe(after, after.predicted_total_s)
    assert pol._carry_s == 0.0
    assert pol.plan(decodes, waiting) == fresh  # no wait carried: the same split again
