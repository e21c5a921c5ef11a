"""Host time of the simulated decode loops: pdmux's CPU-scheduled steps vs duet's look-ahead."""

from __future__ import annotations

import pytest
from sim_helpers import latency

from sglang_duet.latency import Batch
from sglang_duet.policy import BatchPlan
from sglang_duet.policy.state import PrefillChunk
from sglang_duet.sim.executor import Executor


def test_pdmux_steps_pay_the_cpu_round_trip_duet_lookahead_does_not():
    lat = latency()
    ctx, q = [4096] * 16, [2048]
    plan = BatchPlan("spatial", tuple(f"d{i}" for i in range(16)), (PrefillChunk("p", 0, 2048),),
                     40, 92, 4, 0.0, 0.0, 0.0, "test")
    duet = Executor(lat).time_plan(plan, ctx, q, [0], [True])
    pdmux = Executor(lat, free_running=True).time_plan(plan, ctx, q, [0], [True])
    t_d, _ = lat.predict_concurrent(Batch.decode_steps(ctx), Batch(q, [0]), 40, 92)
    assert duet.decode_s == t_d.total_s  # a graph replay per look-ahead step
    cpu = lat.host_seconds(True, "scheduled") - lat.host_seconds(True, "lookahead")
    assert cpu > 0
    assert pdmux.decode_s == pytest.approx(t_d.total_s + cpu)  # one CPU round trip per step
    assert pdmux.step_offsets[0] == pytest.approx(duet.step_offsets[0] + cpu)


def _spatial(n_d: int, k: int, chunks: int = 1) -> BatchPlan:
    return BatchPlan("spatial", tuple(f"d{i}" for i in range(n_d)),
                     tuple(PrefillChunk(f"p{i}", 0, 2048 // chunks) for i in range(chunks)),
                     40, 92, k, 0.0, 0.0, 0.0, "test")


def test_duet_tokens_leave_per_step_but_not_before_both_phases_are_launched():
    """The runtime streams step j once it is done (runtime/lookahead.py), after launching the k
    steps and the prefill: a token leaves at max(j * t_d, that launch time)."""
    lat = latency()
    # (decodes, steps, prompts finishing in the prefill): the last one's 2048 sampled rows make
    # the prefill's launch outlast the first decode steps
    for n_d, k, n_p in ((16, 4, 1), (1, 16, 1), (1, 4, 2048)):
        ctx, q = [4096] * n_d, [2048 // n_p] * n_p
        got = Executor(lat).time_plan(_spatial(n_d, k, n_p), ctx, q, [0] * n_p, [True] * n_p)
        launch = (k * lat.host_seconds(True, "lookahead", n_d)
                  + lat.host_seconds(False, "spatial", n_p))
        assert got.step_offsets == [max(got.decode_s * j, launch) for j in range(1, k + 1)]
    assert got.step_offsets[0] == launch > got.decode_s


def test_reused_predictions_give_the_same_delivery():
    lat = latency()
    ctx = [4096] * 16
    ex = Executor(lat)
    raw = ex.time_plan(_spatial(16, 4), ctx, [2048], [0], [True])
    plan = BatchPlan("spatial", _spatial(16, 4).decode_rids, (PrefillChunk("p", 0, 2048),), 40,
                     92, 4, raw.duration_s, raw.decode_s, raw.prefill_s, "test")
    assert ex.time_plan(plan, ctx, [2048], [0], [True], reuse=True).step_offsets == \
        raw.step_offsets
