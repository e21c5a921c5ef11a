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
