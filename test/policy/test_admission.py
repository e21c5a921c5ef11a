"""Admission.order (#48 item 7): the fast, memoised order returns exactly what the readable
reference (`Admission.reference_order`) returns, on random queues and clocks, ties included."""

from __future__ import annotations

import random

import pytest

from sglang_duet.policy.admission import ADMISSION_ORDERS, Admission, AdmissionConfig, Candidate


def seconds(q: int, c: int) -> float:
    """A prefill-time stand-in with the fitted form's shape (seconds)."""
    return 2e-5 * q + 1e-10 * q * (c + q / 2.0) + 0.01


def queue(rng: random.Random, n: int, now: float, ties: bool) -> list[Candidate]:
    out = []
    for _ in range(n):
        arrival = now - (rng.choice([0.0, 1.0, 5.0]) if ties else rng.uniform(0, 40))
        prompt = rng.choice([512, 4096]) if ties else rng.randint(16, 60000)
        out.append(Candidate(arrival, prompt, rng.choice([0, 0, prompt // 2])))
    return out


@pytest.mark.parametrize("order", ADMISSION_ORDERS)
@pytest.mark.parametrize("per_token_s", [0.0, 2e-4])
@pytest.mark.parametrize("ties", [False, True])
def test_order_equals_reference(order, per_token_s, ties):
    rng = random.Random(hash((order, per_token_s, ties)) & 0xFFFF)
    adm = Admission(AdmissionConfig(order, 10.0, per_token_s, 2.0), seconds)
    ref = Admission(AdmissionConfig(order, 10.0, per_token_s, 2.0), seconds)
    checked = reused = 0
    for _ in range(40):
        now = rng.uniform(1e3, 1e6)
        waiting = queue(rng, rng.choice([0, 1, 2, 5, 40, 256]), now, ties)
        # the same queue over a run of later clocks (memo hits and recomputes), then as new
        # tuples (equal, not identical)
        for step in range(25):
            t = now + step * rng.choice([0.0, 0.01, 0.5, 3.0])
            memo = adm._memo
            got = adm.order(waiting if step % 2 else [tuple(c) for c in waiting], t)
            reused += memo is not None and adm._memo is memo
            assert got == ref.reference_order(waiting, t), (order, t)
            checked += 1
    assert checked == 1000 and reused > 0  # the memo was exercised, not just recomputed


def test_reference_order_is_the_documented_rule():
    """A hand-checked case: one request past the aging bound goes first; Moore-Hodgson sets the
    long request aside so that both short ones make their deadlines; fcfs keeps arrival order;
    sjf the shortest first."""
    now = 100.0
    waiting = [Candidate(now - 25.0, 100),      # waited 25 s > aging 2 x 10 s: first
               Candidate(now - 9.0, 300_000),   # long: 6.02 s of prefill, due in 1 s
               Candidate(now - 8.0, 1000),      # due in 2 s
               Candidate(now - 7.0, 2000)]      # due in 3 s

    def secs(q: int, c: int) -> float:
        return 2e-5 * q + 0.02

    def order(kind: str) -> list[int]:
        adm = Admission(AdmissionConfig(kind, 10.0, 0.0, 2.0), secs)
        got = adm.order(waiting, now)
        assert got == adm.reference_order(waiting, now)
        return got

    assert order("fcfs") == [0, 1, 2, 3]
    assert order("deadline") == [0, 2, 3, 1]
    assert order("sjf") == [0, 2, 3, 1]
    assert order("sjf") != order("fcfs")


def test_memo_is_dropped_when_a_request_crosses_the_aging_bound():
    adm = Admission(AdmissionConfig("sjf", 10.0, 0.0, 1.0), seconds)
    waiting = [Candidate(0.0, 50_000), Candidate(5.0, 100)]
    assert adm.order(waiting, 9.0) == [1, 0]  # the short one first
    assert adm.order(waiting, 9.5) == [1, 0]  # memo
    assert adm.order(waiting, 10.0) == [0, 1]  # the long one has waited 10 s = aging x SLO
