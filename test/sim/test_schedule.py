"""sim.schedule: duet's admission order runs in the simulator's replicas."""

from __future__ import annotations

import numpy as np
from sim_helpers import make_workload

from sglang_duet.sim import SimConfig, simulate


def _ttft(admission: str) -> dict[int, float]:
    # one GPU busy with a 20K-token prompt while a 60K-token one and then ten 200-token ones
    # queue behind it: when it is done, the order decides which prefill runs next
    lens = [20000, 60000] + [200] * 10
    arrivals = np.concatenate([[0.0, 0.001], 0.002 + 0.001 * np.arange(10)])
    w = make_workload(arrivals, lens, [8] * 12)
    cfg = SimConfig(policy="duet", gpus=1, duet_admission=admission, ttft_slo_ms=3000.0,
                    token_budget=2048, frontend=False)
    res = simulate(cfg, w)
    return {r.prompt_len: r.first_token_s - r.arrival_s for r in res.requests
            if r.prompt_len == 60000} | {-1: max(r.first_token_s - r.arrival_s
                                                  for r in res.requests if r.prompt_len == 200)}


def test_short_prompts_overtake_a_queued_long_one_only_with_a_deadline_order():
    """Under fcfs the long prompt goes next and the short ones wait for all of it (3.9 s, past
    their 3 s SLO); under either order that predicts, they go first: the long one first would
    make all ten late, and it alone misses when it goes last."""
    fcfs = _ttft("fcfs")
    for order in ("deadline", "sjf"):
        got = _ttft(order)
        assert got[-1] < 0.5 * fcfs[-1]  # the short ones' worst TTFT
        assert got[60000] > fcfs[60000]  # at the long one's cost


def test_duet_admission_is_a_checked_knob():
    import pytest

    with pytest.raises(ValueError, match="admission"):
        SimConfig(duet_admission="lifo").validate()
    with pytest.raises(ValueError, match="schedule-policy"):
        SimConfig(schedule_policy="nope").validate()


def test_the_config_names_every_order_the_simulator_follows():
    from sglang_duet.sim.config import SCHEDULE_POLICIES
    from sglang_duet.sim.schedule import SGLANG_ORDERS

    assert tuple(SGLANG_ORDERS) == SCHEDULE_POLICIES


def test_an_order_no_admission_reads_is_skipped_and_changes_nothing(monkeypatch):
    """A replica whose prompt tokens in flight fill its token budget admits no one, so duet's
    order is not computed then (`Replica.may_admit`); the next order does not depend on the
    queue's, so every request's first token and finish are the same as ordering every time."""
    from sglang_duet.sim.replica import Replica

    rng = np.random.default_rng(3)
    n = 60
    lens = np.where(rng.random(n) < 0.3, rng.integers(8000, 30000, n), rng.integers(100, 2000, n))
    w = make_workload(np.cumsum(rng.exponential(0.05, n)), lens.tolist(), [16] * n)
    cfg = SimConfig(policy="duet", gpus=1, duet_admission="deadline", ttft_slo_ms=2000.0,
                    token_budget=2048, frontend=False)
    skipped, real = [], Replica.may_admit

    def counted(self):
        ok = real(self)
        skipped.append(not ok)
        return ok

    monkeypatch.setattr(Replica, "may_admit", counted)
    skipping = simulate(cfg, w)
    monkeypatch.setattr(Replica, "may_admit", lambda self: True)
    every = simulate(cfg, w)
    assert sum(skipped) > 10 and not all(skipped)  # both cases happened
    times = [[(r.first_token_s, r.finish_s) for r in res.requests] for res in (skipping, every)]
    assert times[0] == times[1]
