"""The replica tells the planner when the KV pool holds prompts back (its admission stopped at
a request whose pages did not fit), not when the token budget does, and how much of the pool
requests hold; the automatic backlog share (`policy/backlog.py`) follows both."""

from __future__ import annotations

import numpy as np
from sim_helpers import make_workload

from sglang_duet.sim import SimConfig, Simulation


def _flags(**kw) -> tuple[list[tuple[bool, bool, float]], list[float]]:
    n = 24
    w = make_workload(np.zeros(n), [1500] * n, [64] * n)  # a burst: the queue outlasts admission
    sim = Simulation(SimConfig(policy="duet", gpus=1, **kw), w)
    seen: list[tuple[bool, bool, float]] = []
    shares: list[float] = []
    for rep in sim.replicas:
        plan = rep.planner.plan

        def record(decodes, waiting, backlog=False, kv_held=False, kv_use=0.0, _plan=plan,
                   _pol=rep.planner, _kv=rep.kv):
            assert kv_use == _kv.use
            seen.append((backlog, kv_held, kv_use))
            out = _plan(decodes, waiting, backlog, kv_held, kv_use)
            shares.append(_pol._share)
            return out

        rep.planner.plan = record
    sim.run()
    return seen, shares


def test_a_full_kv_pool_holds_prompts_back_and_lowers_the_share():
    seen, shares = _flags(max_total_tokens=8192)
    assert any(held for _, held, _ in seen)
    assert max(use for *_, use in seen) > 0.9
    assert min(shares) < 1.0


def test_a_queue_beyond_the_token_budget_is_a_backlog_but_not_kv_held():
    seen, shares = _flags(token_budget=2048)
    assert any(backlog for backlog, *_ in seen) and not any(held for _, held, _ in seen)
    assert max(use for *_, use in seen) < 0.2  # 24 x 1,564 tokens of a 330K-token pool
    assert set(shares) == {1.0}


def test_a_fixed_share_ignores_the_kv_pool():
    _, shares = _flags(max_total_tokens=8192, duet_backlog_share=0.5)
    assert set(shares) == {0.5}
