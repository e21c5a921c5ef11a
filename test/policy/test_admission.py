"""policy.admission: the orders, the aging bound, and the fitted prefill seconds."""

from __future__ import annotations

import itertools
import random

import pytest

from sglang_duet.policy.admission import (
    Admission,
    AdmissionConfig,
    Candidate,
    fit_prefill_seconds,
)


def _per_token(q: int, c: int) -> float:
    return q / 1000.0  # 1 ms per new token


def _adm(order: str, **kw) -> Admission:
    return Admission(AdmissionConfig(order, 10.0, **kw), _per_token)


W = [Candidate(0.0, 9000), Candidate(0.1, 500), Candidate(0.2, 800), Candidate(0.3, 300)]


def test_fcfs_keeps_arrival_order():
    shuffled = [W[2], W[0], W[3], W[1]]
    assert _adm("fcfs").order(shuffled, 1.0) == [1, 3, 0, 2]


def test_sjf_orders_by_predicted_prefill():
    assert _adm("sjf").order(W, 1.0) == [3, 1, 2, 0]


def test_cached_tokens_shorten_the_prediction():
    w = [Candidate(0.0, 4000, cached=3900), Candidate(0.1, 500)]
    assert _adm("sjf").order(w, 1.0) == [0, 1]


def test_deadline_sets_aside_the_long_prompt_only_when_it_makes_others_late():
    # 9 s of prefill first would make the three short ones late (due at 10.1 .. 10.3 s)
    assert _adm("deadline").order(W, 1.0) == [1, 2, 3, 0]
    # at t=0 with room for everything in time: arrival order
    roomy = [Candidate(0.0, 2000), Candidate(0.1, 500), Candidate(0.2, 800)]
    assert _adm("deadline").order(roomy, 0.2) == [0, 1, 2]


def _on_time(w: list[Candidate], order: list[int], now: float, adm: Admission) -> int:
    t, n = now, 0
    for i in order:
        t += adm.service(w[i])
        n += t <= adm.deadline(w[i])
    return n


@pytest.mark.parametrize("seed", range(20))
def test_deadline_maximises_requests_on_time(seed):
    """Moore and Hodgson's rule against every permutation of six random requests."""
    rng = random.Random(seed)
    w = [Candidate(rng.uniform(0, 5), rng.choice([300, 1500, 4000, 9000])) for _ in range(6)]
    adm = _adm("deadline")
    best = max(_on_time(w, list(p), 5.0, adm) for p in itertools.permutations(range(6)))
    assert _on_time(w, adm.order(w, 5.0), 5.0, adm) == best


@pytest.mark.parametrize("order", ["fcfs", "deadline", "sjf"])
def test_requests_past_the_aging_bound_go_first_in_arrival_order(order):
    w = [Candidate(50.0, 100), Candidate(5.0, 9000), Candidate(10.0, 8000), Candidate(49.0, 50)]
    # at t=40 the first two of the old ones have waited >= 30 s = 3 x 10 s
    got = _adm(order).order(w, 40.0)
    assert got[:2] == [1, 2]
    assert sorted(got) == [0, 1, 2, 3]


def test_per_token_term_gives_long_prompts_later_deadlines():
    adm = _adm("deadline", per_token_s=0.001)
    assert adm.deadline(Candidate(0.0, 9000)) == pytest.approx(19.0)


@pytest.mark.parametrize("kw", [dict(order="lifo"), dict(order="sjf", ttft_slo_s=0.0),
                                dict(order="sjf", aging=0.0), dict(order="sjf", per_token_s=-1)])
def test_bad_config_is_refused(kw):
    with pytest.raises(ValueError):
        AdmissionConfig(**kw)


def test_the_fit_recovers_a_closed_form_model():
    truth = lambda q, c: 2e-5 * q + 3e-10 * q * (c + q / 2.0) + 0.004  # noqa: E731
    fit = fit_prefill_seconds(truth)
    for q, c in ((100, 0), (3000, 12000), (120000, 0)):
        assert fit(q, c) == pytest.approx(truth(q, c), rel=1e-6)
