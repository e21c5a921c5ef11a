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
    pol = DuetPolicy.build("adaptive", 0.1)
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
        assert "nothing meets tau" in plan.reason


def test_modes_on_the_same_input():
    decodes = running(64, 4096)
    waiting = [ReqState("w", 8192, 0, 0)]
    agg = DuetPolicy.build("aggregated", 0.1).plan(decodes, waiting)
    assert agg.mode == "aggregated" and agg.predicted_total_s > 0.1  # never splits
    forced = DuetPolicy.build("spatial", 1.0).plan(running(2, 100), [ReqState("w", 50, 0, 0)])
    assert forced.mode == "spatial"  # even under light load
    only_decodes = DuetPolicy.build("adaptive", 0.1).plan(decodes, [])
    assert only_decodes.mode == "decode_only" and only_decodes.sms_decode == 132
    only_prefill = DuetPolicy.build("adaptive", 0.1).plan([], waiting)
    assert only_prefill.mode == "aggregated" and only_prefill.decode_rids == ()
    assert DuetPolicy.build("adaptive", 0.1).plan([], []).mode == "idle"


def test_green_context_menu_is_respected():
    from sglang_duet.policy import SmMenu

    base = DuetPolicy.build("adaptive", 0.1)
    pol = DuetPolicy("adaptive", 0.1, latency=base.latency, menu=SmMenu.green_contexts(132))
    plan = pol.plan(running(64, 4096), [ReqState("w", 8192, 0, 0)])
    assert plan.mode == "spatial"
    assert plan.sms_decode % 8 == 0 and plan.sms_decode >= 8 and plan.sms_prefill >= 8


def test_constructor_validation():
    base = DuetPolicy.build("adaptive", 0.1)
    with pytest.raises(ValueError):
        DuetPolicy("disaggregated", 0.1, latency=base.latency)
    with pytest.raises(ValueError):
        DuetPolicy("adaptive", 0.0, latency=base.latency)
    with pytest.raises(TypeError):
        DuetPolicy("adaptive", 0.1)
    from sglang_duet.policy import SmMenu

    with pytest.raises(ValueError):
        DuetPolicy("adaptive", 0.1, latency=base.latency, menu=SmMenu.tpc_masks(108))
