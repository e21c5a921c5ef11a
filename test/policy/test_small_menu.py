"""The short-menu loop (`policy.small_menu`) picks what the vectorised `best_gap_split` picks."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_duet.latency import Batch, LatencyModel, get_hardware, get_model
from sglang_duet.partition.plan import plan_menu
from sglang_duet.policy import gap_optimizer
from sglang_duet.policy.gap_optimizer import best_gap_split, search_gap
from sglang_duet.policy.small_menu import SMALL_MENU, best_gap_split_small
from sglang_duet.policy.state import PrefillChunk

times = st.floats(1e-4, 0.3, allow_nan=False)


@st.composite
def tables(draw):
    """Decode / prefill times per menu entry, with repeated entries (ties pick the first)."""
    n = draw(st.integers(1, SMALL_MENU))
    t_d = draw(st.lists(times, min_size=n, max_size=n))
    t_p = draw(st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=n, max_size=n))
    if n > 2 and draw(st.booleans()):
        t_d[1], t_p[1] = t_d[0], t_p[0]
    return t_d, t_p


@settings(max_examples=400, deadline=None)
@given(tables(), st.integers(1, 512), st.integers(0, 16384), times, st.floats(0.0, 0.05),
       st.integers(1, 64), st.integers(1, 80), st.one_of(st.none(), times),
       st.floats(0.0, 0.1), st.sampled_from([0.0, 1.0, 0.5]))
def test_the_loop_equals_the_vectorised_split(tab, n_d, n_p, tau, carry, k_max, k_done,
                                              step_tau, t_alone, weight):
    t_d, t_p = tab
    args = (n_d, n_p, tau, carry, k_max, k_done, step_tau, t_alone, weight)
    want = best_gap_split(np.array(t_d), np.array(t_p), *args)
    got = best_gap_split_small(t_d, t_p, *args)
    assert got == want
    if got is not None:
        assert type(got[0]) is int and type(got[1]) is int and type(got[2]) is float


@settings(max_examples=400, deadline=None)
@given(tables(), st.integers(1, 512), st.integers(0, 16384), times, st.floats(0.0, 0.05),
       st.integers(1, 64), st.integers(1, 80), times, st.floats(0.0, 0.1), st.data())
def test_the_loop_equals_the_vectorised_split_on_the_boundaries(
        tab, n_d, n_p, tau, carry, k_max, k_done, step_tau, t_alone, data):
    """Entries placed exactly where a comparison flips: a step of tau - carry or step_tau, a
    prefill that m steps cover to the last bit (tp = tau - over + m * td)."""
    t_d, t_p = tab
    for i in range(len(t_d)):
        kind = data.draw(st.sampled_from(["free", "step", "target", "cover"]))
        if kind == "step" and tau - carry > 0:
            t_d[i] = tau - carry
        elif kind == "target":
            t_d[i] = step_tau
        elif kind == "cover":
            over = max(t_alone - t_d[i], 0.0)
            t_p[i] = max(tau - over + data.draw(st.integers(0, 20)) * t_d[i], 0.0)
    args = (n_d, n_p, tau, carry, k_max, k_done, step_tau, t_alone, 0.0)
    assert best_gap_split_small(t_d, t_p, *args) == best_gap_split(np.array(t_d),
                                                                  np.array(t_p), *args)


def test_search_gap_does_not_depend_on_which_path_scores_the_menu(monkeypatch):
    """The runtime's 6-entry menu through the loop and through numpy: the same choice, over
    loads whose choices differ (the best split, a relaxed backlog target, a shrunk prefill, no
    feasible split)."""
    lat = LatencyModel(get_hardware("h100-sxm"), get_model("qwen3-8b"), None, "published")
    menu = plan_menu("green-ctx", "h100-sxm").sm_menu
    assert len(menu.decode_sizes) <= SMALL_MENU
    prefill_sizes = tuple(menu.total_sms - s for s in menu.decode_sizes)
    chunks = (PrefillChunk("a", 0, 3000), PrefillChunk("b", 4096, 2000))
    pre = Batch([3000, 2000], [0, 4096], [True, False])
    kinds = set()
    for dec in (Batch.decode_steps(list(range(1000, 9000, 125))), Batch.decode_steps([4096] * 16)):
        for tau in (0.02, 0.03, 0.05, 0.08, 0.12):
            for step_tau in (None, tau / 3):
                args = (lat, menu, prefill_sizes, dec, pre, chunks, (True, False), (1.0, 1.1),
                        tau, 0.002, 16, lambda: 1 << 30, step_tau, "lookahead", 0.01, 0.0)
                loop = search_gap(*args)
                with monkeypatch.context() as m:
                    m.setattr(gap_optimizer, "SMALL_MENU", 0)
                    vec = search_gap(*args)
                assert loop == vec
                kinds.add((loop[0].feasible, loop[0].shrunk, loop[0].sms_decode))
    assert (False, False) in {k[:2] for k in kinds} and (True, True) in {k[:2] for k in kinds}
    assert len({k[2] for k in kinds if k[0]}) >= 3
