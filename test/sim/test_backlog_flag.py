"""The replica tells the planner of a backlog only when the KV pool holds prompts back."""

from __future__ import annotations

import numpy as np
from sim_helpers import make_workload

from sglang_duet.sim import SimConfig, Simulation


def _flags(**kw) -> list[bool]:
    n = 24
    w = make_workload(np.zeros(n), [1500] * n, [64] * n)  # a burst: the queue outlasts admission
    sim = Simulation(SimConfig(policy="duet", gpus=1, **kw), w)
    seen: list[bool] = []
    for rep in sim.replicas:
        plan = rep.planner.plan

        def record(decodes, waiting, backlog=False, _plan=plan):
            seen.append(backlog)
            return _plan(decodes, waiting, backlog)

        rep.planner.plan = record
    sim.run()
    return seen


def test_a_full_kv_pool_is_a_backlog():
    assert any(_flags(max_total_tokens=8192))


def test_a_queue_beyond_the_token_budget_is_not():
    assert not any(_flags(token_budget=2048))
