"""PartitionOptimizer search logic on synthetic latency curves, checked against brute force."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sglang_duet.partition.plan import every_tpc
from sglang_duet.policy import PartitionOptimizer, PrefillChunk
from sglang_duet.policy.optimizer import _first_true, best_lookahead


@given(st.integers(1, 80), st.data())
def test_first_true_finds_the_boundary_from_any_hint(n, data):
    cut = data.draw(st.integers(0, n))  # pred(i) <=> i >= cut; cut == n: never
    lo = data.draw(st.integers(0, n - 1))
    hint = data.draw(st.integers(-5, n + 5))
    calls: list[int] = []

    def pred(i: int) -> bool:
        assert lo <= i < n
        calls.append(i)
        return i >= cut

    got = _first_true(lo, n, pred, hint)
    expected = max(cut, lo) if cut < n else None
    assert got == expected
    if expected is not None and hint == expected:
        assert len(calls) <= 2


@given(
    st.integers(0, 300),
    st.integers(0, 20000),
    st.floats(1e-3, 1.0),
    st.floats(0.0, 2.0),
    st.integers(1, 8),
)
def test_best_lookahead_is_the_argmax(n_d, n_p, t_d, t_p, big_k):
    k, obj = best_lookahead(n_d, n_p, t_d, t_p, big_k)
    objs = [(j * n_d + n_p) / max(j * t_d, t_p) for j in range(1, big_k + 1)]
    assert obj == max(objs)
    assert k == 1 + objs.index(max(objs))


def synthetic(decode_work: float, prefill_rate: float, contention: float, total: int):
    """t_d falls with S_d (contention grows with the prefill share); t_p = tokens / rate / S_p
    plus a fixed cost, so the objective is unimodal in S_d."""

    def evaluate(sms_d: int, chunks: tuple[PrefillChunk, ...]) -> tuple[float, float]:
        n_tok = sum(c.length for c in chunks)
        sms_p = total - sms_d
        t_d = decode_work / sms_d * (1.0 + contention * sms_p / total)
        t_p = 0.004 + n_tok / (prefill_rate * sms_p)
        return t_d, t_p

    return evaluate


def brute_force(menu, opt, n_d, chunks, evaluate):
    """Best (objective, -S_d) over every S_d, k and (for the check) the unshrunk prefill."""
    best = None
    n_p = sum(c.length for c in chunks)
    for s in menu.decode_sizes:
        t_d, t_p = evaluate(s, chunks)
        if t_d > opt.tbt_slo_s:
            continue
        _, obj = best_lookahead(n_d, n_p, t_d, t_p, opt.max_lookahead)
        if best is None or obj > best[0]:
            best = (obj, s)
    return best


@given(
    n_d=st.integers(1, 256),
    n_p=st.integers(1, 8192),
    tau=st.floats(0.01, 0.3),
    work=st.floats(0.05, 5.0),
    rate=st.floats(200.0, 5000.0),
    contention=st.floats(0.0, 1.0),
    big_k=st.integers(1, 6),
    hint=st.integers(0, 64),
)
def test_optimizer_matches_brute_force_without_shrinking(
    n_d, n_p, tau, work, rate, contention, big_k, hint
):
    menu = every_tpc(132)
    opt = PartitionOptimizer(menu, tau, big_k, shrink=False)
    opt._hint_boundary = hint  # any start gives the same answer
    opt._hint_cross = [hint] * big_k
    chunks = (PrefillChunk("w", 0, n_p),)
    evaluate = synthetic(work, rate, contention, 132)
    got = opt.optimize(n_d, chunks, evaluate)
    ref = brute_force(menu, opt, n_d, chunks, evaluate)
    if ref is None:
        assert not got.feasible
        assert got.sms_decode == menu.decode_sizes[-1]  # smallest t_d
    else:
        assert got.feasible and got.decode_s <= tau
        assert got.objective == ref[0]
        assert got.sms_decode + got.sms_prefill == 132


@given(
    n_d=st.integers(1, 256),
    n_p=st.integers(2, 8192),
    tau=st.floats(0.01, 0.3),
    work=st.floats(0.05, 5.0),
    rate=st.floats(50.0, 5000.0),
)
def test_shrinking_only_ever_raises_the_objective(n_d, n_p, tau, work, rate):
    menu = every_tpc(132)
    chunks = (PrefillChunk("a", 0, n_p // 2), PrefillChunk("b", 100, n_p - n_p // 2))
    chunks = tuple(c for c in chunks if c.length)
    evaluate = synthetic(work, rate, 0.3, 132)
    plain = PartitionOptimizer(menu, tau, 4, shrink=False).optimize(n_d, chunks, evaluate)
    shr = PartitionOptimizer(menu, tau, 4, shrink=True).optimize(n_d, chunks, evaluate)
    assert shr.feasible == plain.feasible
    if plain.feasible:
        assert shr.objective >= plain.objective
        assert shr.decode_s <= tau
    total = sum(c.length for c in shr.prefill)
    assert 1 <= total <= n_p
    if shr.shrunk:
        assert total < n_p
        for mine, orig in zip(shr.prefill, chunks, strict=False):
            assert mine.rid == orig.rid and mine.start == orig.start
            assert mine.length <= orig.length


def test_exhaustive_picks_best_objective_when_nothing_is_feasible():
    menu = every_tpc(132)
    evaluate = synthetic(50.0, 1000.0, 0.2, 132)  # t_d >= 0.38 s everywhere
    opt = PartitionOptimizer(menu, 0.01, 4, shrink=False)
    chunks = (PrefillChunk("w", 0, 4096),)
    got = opt.optimize(64, chunks, evaluate, exhaustive=True)
    assert not got.feasible
    objs = []
    for s in menu.decode_sizes:
        t_d, t_p = evaluate(s, chunks)
        objs.append(best_lookahead(64, 4096, t_d, t_p, 4)[1])
    assert got.objective == max(objs)


@given(
    n_d=st.integers(1, 256),
    n_p=st.integers(2, 8192),
    tau=st.floats(0.01, 0.3),
    work=st.floats(0.05, 5.0),
    rate=st.floats(50.0, 5000.0),
    contention=st.floats(0.0, 1.0),
    big_k=st.integers(1, 6),
    exhaustive=st.booleans(),
)
def test_table_and_floor_change_nothing(n_d, n_p, tau, work, rate, contention, big_k,
                                        exhaustive):
    """A precomputed table of the full chunks and a valid floor (shrink pruning) give the same
    choice as evaluating on demand, shrinking included."""
    menu = every_tpc(132)
    chunks = (PrefillChunk("a", 0, n_p // 2), PrefillChunk("b", 100, n_p - n_p // 2))
    chunks = tuple(c for c in chunks if c.length)
    evaluate = synthetic(work, rate, contention, 132)
    calls: list[int] = []

    def counted(sms_d, ch):
        calls.append(sms_d)
        return evaluate(sms_d, ch)

    def floor(i):  # decode alone (no contention) and the prefill's per-token part
        s = menu.decode_sizes[i]
        return work / s, 1.0 / (rate * (132 - s))

    ref = PartitionOptimizer(menu, tau, big_k).optimize(n_d, chunks, evaluate, exhaustive)
    table = tuple(zip(*(evaluate(s, chunks) for s in menu.decode_sizes), strict=True))
    fast = PartitionOptimizer(menu, tau, big_k)
    got = fast.optimize(n_d, chunks, counted, exhaustive, table, floor)
    assert got == ref
    # only shrunk prefill batches (<= 3 secant steps per shrinking entry) are evaluated on demand
    entries = len(menu) if exhaustive else 2 * big_k + 1
    assert len(calls) <= 3 * entries
