"""sglang-pdmux follows SGLang 0.5.17's own rules (sglang/srt/multiplex/)."""

from __future__ import annotations

import math

import pytest
from sim_helpers import latency, make_workload, run

from sglang_duet.latency import Batch
from sglang_duet.policy import ReqState
from sglang_duet.sim.metrics import token_times
from sglang_duet.sim.policies.pdmux import PdmuxPolicy, divide_sm, whole_request_batch
from sglang_duet.sim.replica import ITER_KINDS


def test_divide_sm_hopper_and_ampere():
    # pdmux_context.divide_sm on a 132-SM H100 (min 8, multiple 8) and a 108-SM A100 (4, 2)
    assert divide_sm(132, 8, 8, 6) == [(112, 20), (104, 28), (96, 36), (88, 44), (80, 52),
                                       (72, 60)]
    assert divide_sm(108, 4, 2, 6) == [(84, 24), (78, 30), (72, 36), (66, 42), (60, 48),
                                       (54, 54)]
    for p, d in divide_sm(132, 8, 8, 6):
        assert p >= d >= 16 and p % 8 == 0


@pytest.mark.parametrize("bs,split", [(1, (112, 20)), (11, (112, 20)), (12, (104, 28)),
                                      (30, (80, 52)), (36, (72, 60)), (500, (72, 60))])
def test_group_by_decode_batch_size(bs, split):
    # multiplexing_mixin.adjust_stream_groups: max(1, min(6, bs * 6 // 36))
    assert PdmuxPolicy(132, "h100-sxm").split_for(bs) == split


def test_prefill_batch_is_whole_requests_up_to_max_prefill_tokens():
    w = [ReqState("a", 30000, 0, 0), ReqState("b", 100, 0, 0)]
    assert [c.length for c in whole_request_batch(w, 16384)] == [30000]  # first always
    w = [ReqState("a", 9000, 0, 0), ReqState("b", 7000, 0, 0), ReqState("c", 500, 0, 0)]
    assert [c.length for c in whole_request_batch(w, 16384)] == [9000, 7000]
    plan = PdmuxPolicy(132, "h100-sxm").plan([ReqState("d", 10, 10, 1)], w)
    assert plan.mode == "spatial" and (plan.sms_prefill, plan.sms_decode) == (112, 20)


def test_decode_free_runs_until_the_prefill_is_seen_done():
    # A decodes while B's 6000-token prompt prefills on 112 SMs: A's steps come every t_d on
    # 20 SMs, and the iteration ends with the first step at or after the prefill's end
    res, _ = run(make_workload([0.0, 0.02], [500, 6000], [200, 2]), "sglang-pdmux", gpus=1,
                 frontend=False)  # scheduler-side times (the front end shifts the client's)
    rep = res.replicas[0]
    spatial = list(rep.iter_kind).index(ITER_KINDS.index("spatial"))
    start = rep.iter_start[spatial]
    times, owner, done = token_times(res)
    a = times[owner == [r.idx for r in done].index(0)]
    before = int((a <= start + 1e-12).sum())
    lat = latency()
    d, p = lat.predict_concurrent(Batch([1], [500 + before - 1]), Batch([6000], [0]), 20, 112)
    # each pdmux step is CPU-scheduled: it pays a scheduled pass's host time (executor)
    t_d = d.total_s + lat.host_seconds(True, "scheduled") - lat.host_seconds(True, "lookahead")
    k = math.ceil(p.total_s / t_d)
    assert k > 3
    got = a[before:before + k] - start
    assert got == pytest.approx([t_d * j for j in range(1, k + 1)], rel=1e-9)
    b_first = next(r.first_token_s for r in res.requests if r.prompt_len == 6000)
    assert b_first == pytest.approx(start + k * t_d, rel=1e-9)
    assert start + k * t_d >= start + p.total_s
