"""policy.admission: the orders, the aging bound, and the fitted prefill seconds; the fast,
memoised `Admission.order` returns exactly what the readable `Admission.reference_order` returns
(#48 item 7), on random queues and clocks, ties included."""

from __future__ import annotations

import itertools
import random

import pytest

from sglang_duet.policy.admission import (
    ADMISSION_ORDERS,
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


# ---- the fast order equals the readable rule (#48 item 7) ----


def seconds(q: int, c: int) -> float:
    """A prefill-time stand-in with the fitted form's shape (seconds)."""
    return 2e-5 * q + 1e-10 * q * (c + q / 2.0) + 0.01


def counting(adm: Admission) -> list[int]:
    """A one-item list that counts ``adm``'s recomputes (calls the memo did not answer)."""
    computed, compute = [0], adm._compute

    def counted(*a):
        computed[0] += 1
        return compute(*a)

    adm._compute = counted
    return computed


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
    given = [rng.uniform(0.001, 3.0) for _ in range(256)]
    for _ in range(40):
        now = rng.uniform(1e3, 1e6)
        waiting = queue(rng, rng.choice([0, 1, 2, 5, 40, 256]), now, ties)
        # the same queue over a run of later clocks (memo hits and recomputes), then as new
        # tuples (equal, not identical)
        for step in range(25):
            t = now + step * rng.choice([0.0, 0.01, 0.5, 3.0])
            memo = adm._memo
            svc = given[:len(waiting)] if step % 5 == 4 else None  # the caller's seconds
            got = adm.order(waiting if step % 2 else [tuple(c) for c in waiting], t, svc)
            reused += memo is not None and adm._memo is memo
            assert got == ref.reference_order(waiting, t, svc), (order, t)
            checked += 1
    assert checked == 1000 and reused > 0  # the memo was exercised, not just recomputed


@pytest.mark.parametrize("order", ADMISSION_ORDERS)
@pytest.mark.parametrize("per_token_s", [0.0, 2e-4])
@pytest.mark.parametrize("ties", [False, True])
def test_a_queue_put_in_the_returned_order_is_in_order(order, per_token_s, ties):
    """Every driver reorders its queue in place by the answer; the next call, on that queue,
    admits the same requests in the same order as the rule (the memo's second case), ties
    included: equal candidates may trade places, nothing else."""
    rng = random.Random(hash((order, per_token_s, ties, "applied")) & 0xFFFF)
    adm = Admission(AdmissionConfig(order, 10.0, per_token_s, 2.0), seconds)
    ref = Admission(AdmissionConfig(order, 10.0, per_token_s, 2.0), seconds)
    computed = counting(adm)
    applied = 0  # calls on a queue just reordered, answered without computing
    for _ in range(30):
        now = rng.uniform(1e3, 1e6)
        waiting = queue(rng, rng.choice([2, 5, 40, 256]), now, ties)
        draw = rng.random()  # the caller's seconds: none, distinct, or with many ties
        svc = (None if draw < 0.4 else [rng.uniform(0.001, 3.0) for _ in waiting] if draw < 0.7
               else [rng.choice([0.5, 1.0, 2.0]) for _ in waiting])
        moved = False
        for step in range(10):
            t = now + step * rng.choice([0.0, 0.01, 0.5, 3.0])
            before = computed[0]
            got = adm.order(waiting, t, svc)
            want = ref.reference_order(waiting, t, svc)
            assert [waiting[i] for i in got] == [waiting[i] for i in want], (order, t)
            applied += moved and computed[0] == before
            moved = got != list(range(len(waiting)))
            waiting = [waiting[i] for i in got]
            svc = None if svc is None else [svc[i] for i in got]
    assert applied >= 10  # the applied answer was recognised, not recomputed


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


@pytest.mark.parametrize("seed", range(3))
def test_the_memo_holds_exactly_until_the_order_would_change(seed):
    """A queue swept by a fine clock, as it drifts into lateness (requests turning late, then
    hopeless): the memoised order equals the rule at every tick, and the memo answered most."""
    rng = random.Random(seed)
    now = 1000.0
    waiting = queue(rng, 40, now, False)
    adm = Admission(AdmissionConfig("deadline", 10.0, 0.0, 5.0), seconds)
    ref = Admission(AdmissionConfig("deadline", 10.0, 0.0, 5.0), seconds)
    computed = counting(adm)
    for tick in range(2000):
        t = now + 0.005 * tick
        assert adm.order(waiting, t) == ref.reference_order(waiting, t), t
    assert 5 < computed[0] < 1000


@pytest.mark.parametrize("order", ADMISSION_ORDERS)
@pytest.mark.parametrize("per_token_s", [0.0, 2e-4])
def test_the_answer_does_not_depend_on_the_queues_order(order, per_token_s):
    """The same requests in any queue order are admitted in the same sequence, tied arrivals,
    deadlines and seconds and requests past the aging bound included, so a driver that skips
    asking while it admits no one (`sim.replica.Replica.may_admit`) changes no later answer."""
    rng = random.Random(hash((order, per_token_s, "perm")) & 0xFFFF)
    for _ in range(60):
        now = rng.uniform(1e3, 1e5)
        waiting = queue(rng, rng.choice([2, 5, 40]), now, True)
        given = None if rng.random() < 0.5 else [rng.choice([0.5, 1.0]) for _ in waiting]
        perm = list(range(len(waiting)))
        rng.shuffle(perm)
        shuffled = [waiting[i] for i in perm]
        moved = None if given is None else [given[i] for i in perm]
        for adm_order in ("order", "reference_order"):
            adm = Admission(AdmissionConfig(order, 10.0, per_token_s, 0.5), seconds)
            t = now + rng.choice([0.0, 2.0, 6.0])
            a = getattr(adm, adm_order)(waiting, t, given)
            b = getattr(adm, adm_order)(shuffled, t, moved)
            pairs = [(waiting[i], None if given is None else given[i]) for i in a]
            assert pairs == [(shuffled[i], None if moved is None else moved[i]) for i in b]
