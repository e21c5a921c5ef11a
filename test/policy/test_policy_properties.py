"""DuetPolicy invariants (hypothesis) with the built-in Qwen3-8B / H100 latency model."""

from __future__ import annotations

import functools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_duet.latency import Batch
from sglang_duet.partition.plan import every_tpc, menu_for
from sglang_duet.partition.sizes import Granularity
from sglang_duet.policy import DuetPolicy, ReqState, form_chunked_batch
from sglang_duet.policy.duet import OBJECTIVES

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MENUS = {"tpc": every_tpc(132),
         "green": menu_for("green-ctx", 132, Granularity(8, 8), 0, False, 8, 8).sm_menu}


@functools.cache
def policy(mode: str, tau: float, menu: str, budget: int, k: int,
           scheme: str = "gap") -> DuetPolicy:
    base = DuetPolicy.build("adaptive", 0.1)
    return DuetPolicy(mode, tau, budget, k, base.latency, MENUS[menu], scheme=scheme)


@st.composite
def workload(draw):
    decodes = []
    for i in range(draw(st.integers(0, 96))):
        p = draw(st.integers(1, 16384))
        decodes.append(ReqState(f"d{i}", p, p, draw(st.integers(1, 1024))))
    waiting = []
    for i in range(draw(st.integers(0, 6))):
        p = draw(st.integers(1, 32768))
        waiting.append(ReqState(f"w{i}", p, draw(st.integers(0, p - 1)), 0))
    return decodes, waiting


params = st.tuples(
    st.sampled_from(["adaptive", "aggregated", "spatial"]),
    st.sampled_from([0.02, 0.05, 0.1, 0.2]),
    st.sampled_from(sorted(MENUS)),
    st.sampled_from([512, 2048, 8192]),
    st.integers(1, 4),
)


def fresh(pol: DuetPolicy) -> DuetPolicy:
    return DuetPolicy(
        pol.mode, pol.tbt_slo_s, pol.token_budget, pol.max_lookahead, pol.latency, pol.menu,
        scheme=pol.scheme,
    )


@SETTINGS
@given(workload(), params)
def test_structural_invariants(work, prm):
    decodes, waiting = work
    pol = policy(*prm)
    plan = pol.plan(decodes, waiting)
    total = pol.menu.total_sms
    # every running decode exactly once, in order
    assert plan.decode_rids == tuple(r.rid for r in decodes)
    # chunks within the remaining prompt and the budget
    by_rid = {r.rid: r for r in waiting}
    assert len({c.rid for c in plan.prefill}) == len(plan.prefill)
    for c in plan.prefill:
        assert c.start == by_rid[c.rid].computed
        assert 1 <= c.length <= by_rid[c.rid].remaining_prompt
    assert plan.num_prefill_tokens <= pol.token_budget
    assert plan.num_prefill_tokens + len(decodes) <= max(pol.token_budget, len(decodes))
    # partitions
    if plan.mode == "spatial":
        assert plan.sms_decode in pol.menu.decode_sizes
        assert plan.sms_decode % pol.menu.granularity == 0
        assert plan.sms_prefill == total - plan.sms_decode
        assert plan.sms_decode + plan.sms_prefill <= total
        assert 1 <= plan.lookahead <= pol.max_lookahead
        assert plan.prefill and plan.decode_rids
        assert plan.predicted_total_s == max(
            plan.lookahead * plan.predicted_decode_s, plan.predicted_prefill_s
        )
    elif plan.mode == "aggregated":
        assert plan.sms_decode == plan.sms_prefill == total and plan.lookahead == 1
    elif plan.mode == "decode_only":
        assert (plan.sms_decode, plan.sms_prefill, plan.prefill) == (total, 0, ())
    else:
        assert plan.mode == "idle" and not decodes
    if pol.mode == "aggregated":
        assert plan.mode in ("aggregated", "idle")
    if pol.mode == "spatial" and plan.decode_rids and plan.prefill:
        assert plan.mode == "spatial"


@SETTINGS
@given(workload(), params)
def test_aggregated_mode_is_plain_chunked_prefill(work, prm):
    decodes, waiting = work
    pol = policy("aggregated", *prm[1:])
    plan = pol.plan(decodes, waiting)
    rids, chunks = form_chunked_batch(decodes, waiting, pol.token_budget)
    if rids or chunks:
        assert (plan.mode, plan.decode_rids, plan.prefill) == ("aggregated", rids, chunks)


@SETTINGS
@given(workload(), params)
def test_deterministic(work, prm):
    decodes, waiting = work
    pol = policy(*prm)
    first = pol.plan(decodes, waiting)
    assert pol.plan(decodes, waiting) == first
    assert fresh(pol).plan(decodes, waiting) == first  # search hints do not change answers


def feasible_exists(pol: DuetPolicy, decodes, waiting) -> bool:
    """Brute force over the whole menu: aggregated, every split with the plan's prefill batch,
    or the decodes alone."""
    lat, tau = pol.latency, pol.tbt_slo_s
    rids, chunks = form_chunked_batch(decodes, waiting, pol.token_budget)
    ctx = [r.decode_context for r in decodes]
    dec = Batch([1] * len(ctx), ctx)
    if lat.predict(dec).total_s <= tau:
        return True
    if not chunks:
        return False
    plen = {r.rid: r.prompt_len for r in waiting}
    pre = Batch(
        [c.length for c in chunks],
        [c.start for c in chunks],
        [c.completes(plen[c.rid]) for c in chunks],
    )
    if lat.predict(dec.concat(pre)).total_s <= tau:
        return True
    total = pol.menu.total_sms
    return any(
        lat.predict_concurrent(dec, pre, s, total - s)[0].total_s <= tau
        for s in pol.menu.decode_sizes
    )


@SETTINGS
@given(workload(), params)
def test_meets_tau_whenever_some_plan_does(work, prm):
    # the paper's notion (one decode step <= tau); the gap scheme's bound is checked by
    # test_gap_choice_is_the_best_split_whose_gap_meets_tau
    decodes, waiting = work
    pol = policy("adaptive", *prm[1:], scheme="paper")
    plan = pol.plan(decodes, waiting)
    if plan.mode == "idle" or not decodes:
        return
    if feasible_exists(pol, decodes, waiting):
        assert plan.predicted_tbt_s <= pol.tbt_slo_s, plan.reason
    else:
        assert "nothing meets tau" in plan.reason or plan.mode == "decode_only"


@SETTINGS
@given(workload(), params)
def test_spatial_choice_is_the_best_feasible_split(work, prm):
    """Without shrinking, the optimizer's pick equals a full scan of menu x lookahead."""
    decodes, waiting = work
    pol = policy("spatial", *prm[1:], scheme="paper")
    pol.optimizer.shrink = False
    try:
        plan = pol.plan(decodes, waiting)
    finally:
        pol.optimizer.shrink = True
    if plan.mode != "spatial" or plan.predicted_decode_s > pol.tbt_slo_s:
        return
    lat, total = pol.latency, pol.menu.total_sms
    ctx = [r.decode_context for r in decodes]
    dec = Batch([1] * len(ctx), ctx)
    plen = {r.rid: r.prompt_len for r in waiting}
    pre = Batch(
        [c.length for c in plan.prefill],
        [c.start for c in plan.prefill],
        [c.completes(plen[c.rid]) for c in plan.prefill],
    )
    n_d, n_p = len(decodes), plan.num_prefill_tokens
    best = 0.0
    for s in pol.menu.decode_sizes:
        bd, bp = lat.predict_concurrent(dec, pre, s, total - s)
        if bd.total_s > pol.tbt_slo_s:
            continue
        for k in range(1, pol.max_lookahead + 1):
            best = max(best, (k * n_d + n_p) / max(k * bd.total_s, bp.total_s))
    got = (plan.lookahead * n_d + n_p) / plan.predicted_total_s
    assert got >= best * (1 - 1e-9)


@SETTINGS
@given(workload(), params)
def test_gap_choice_is_the_best_split_whose_gap_meets_tau(work, prm):
    """The gap scheme's unshrunk pick equals a full scan of menu x lookahead under its bound:
    t_d <= tau and t_p - k * t_d + max(t_d, t_alone) <= tau (unless every decode is done within
    k steps), by its objective (prefill tokens per second: a decode token weighs 0)."""
    decodes, waiting = work
    pol = policy("spatial", *prm[1:])
    plan = pol.plan(decodes, waiting)
    if plan.mode != "spatial" or "shrunk" in plan.reason or "no split" in plan.reason:
        return
    tau, k_max = pol.tbt_slo_s, pol.max_lookahead
    t_d, t_p, k = plan.predicted_decode_s, plan.predicted_prefill_s, plan.lookahead
    done = max(r.max_new_tokens - r.generated for r in decodes) if all(
        r.max_new_tokens for r in decodes) else 1 << 30
    ctx = [r.decode_context for r in decodes]
    dec = Batch([1] * len(ctx), ctx)
    alone = pol.latency.predict(dec).total_s

    def boundary(a, b, kk):
        return b - kk * a + max(a, alone)

    assert t_d <= tau + 1e-12 and 1 <= k <= k_max
    assert boundary(t_d, t_p, k) <= tau + 1e-9 or k >= done
    ctx = [r.decode_context for r in decodes]
    dec = Batch([1] * len(ctx), ctx)
    plen = {r.rid: r.prompt_len for r in waiting}
    pre = Batch([c.length for c in plan.prefill], [c.start for c in plan.prefill],
                [c.completes(plen[c.rid]) for c in plan.prefill])
    n_d, n_p, total = len(decodes), plan.num_prefill_tokens, pol.menu.total_sms
    w = OBJECTIVES[pol.objective]
    best = 0.0
    for s in pol.menu.decode_sizes:
        bd, bp = pol.latency.predict_concurrent(dec, pre, s, total - s)
        a, b = bd.total_s, bp.total_s
        for kk in range(1, k_max + 1):
            if a <= tau and (boundary(a, b, kk) <= tau + 1e-9 or kk >= done):
                best = max(best, (kk * w * n_d + n_p) / max(kk * a, b))
    assert (k * w * n_d + n_p) / plan.predicted_total_s >= best * (1 - 1e-9)


@SETTINGS
@given(workload(), params, st.lists(st.floats(0.3, 3.0), min_size=3, max_size=3))
def test_vectorised_search_equals_the_scalar_reference(work, prm, ratios):
    """One numpy pass over the menu (plus shrink pruning) picks the same plan, bit for bit, as
    scalar predict_concurrent calls on demand -- also with moved correction factors."""
    decodes, waiting = work
    fast, slow = fresh(policy(*prm)), fresh(policy(*prm))
    slow.vectorised = False
    for ratio in ratios:
        a, b = fast.plan(decodes, waiting), slow.plan(decodes, waiting)
        assert a == b
        if a.mode != "idle":
            fast.observe(a, a.predicted_total_s * ratio)
            slow.observe(b, b.predicted_total_s * ratio)
        decodes = [ReqState(r.rid, r.prompt_len, r.computed, r.generated + 1) for r in decodes]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 200), st.one_of(st.none(), st.integers(1, 200))),
                max_size=40), st.integers(1, 64))
def test_steps_to_finish_is_the_largest_remaining_up_to_the_cap(reqs, cap):
    """Every decode's remaining steps (max_new_tokens - generated, >= 1; unbounded without a
    max_new_tokens): their maximum when it is <= cap, else some number > cap."""
    from sglang_duet.policy.duet import _steps_to_finish

    decodes = [ReqState(f"d{i}", 8, 8, g, m) for i, (g, m) in enumerate(reqs)]
    want = max((1 << 30 if r.max_new_tokens is None else max(1, r.max_new_tokens - r.generated)
                for r in decodes), default=1)
    got = _steps_to_finish(decodes, cap)
    assert got == want if want <= cap else got > cap
