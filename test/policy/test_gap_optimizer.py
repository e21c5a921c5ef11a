"""The split search's helpers (`policy.gap_optimizer`) on hand-made timings (seconds)."""

from __future__ import annotations

from sglang_duet.policy.gap_optimizer import boundary_gap, shrink_to_fit
from sglang_duet.policy.state import PrefillChunk


def test_shrink_finds_a_fit_where_regula_falsi_stalls():
    """A chunk deep into a long prompt first: its tokens hold most of t_p, so the boundary gap
    is concave in the prefix size and regula falsi, keeping its feasible end at 0 tokens, creeps
    down from above without reaching a fit; the bisection after it finds the longest prefix
    within a few tokens."""
    chunks = (PrefillChunk("deep", 60_000, 4_000), PrefillChunk("fresh", 0, 4_000))
    t_d, tau, k_cap, t_alone = 0.03, 0.09, 16, 0.01

    def evaluate(prefix):
        deep = min(sum(c.length for c in prefix), 4_000)
        rest = sum(c.length for c in prefix) - deep
        return t_d, 140e-6 * deep + 10e-6 * rest

    t_p = evaluate(chunks)[1]
    assert boundary_gap(t_d, t_p, k_cap, t_alone) > tau  # the whole prefill does not fit
    fit = (tau + (k_cap - 1) * t_d) / 140e-6  # the deep tokens that do: about 3857
    ch = shrink_to_fit(0, 16, 116, chunks, 8, t_d, t_p, tau, k_cap, evaluate, tau, t_alone)
    assert ch is not None and ch.feasible and ch.shrunk
    size = sum(c.length for c in ch.prefill)
    assert fit - 100 <= size <= fit
    assert boundary_gap(ch.decode_s, ch.prefill_s, k_cap, t_alone) <= tau + 1e-12


def test_boundary_gap_on_floats_equals_the_array_form():
    """The scalar path (a chosen split's gap) computes what the array form does per entry."""
    import numpy as np

    t_d = [0.001, 0.02, 0.05, 0.07]
    t_p = [0.3, 0.09, 0.2, 0.01]
    for t_alone in (0.0, 0.03, 0.06):
        for k in (1, 3, 8):
            arr = boundary_gap(np.array(t_d), np.array(t_p), k, t_alone)
            got = [boundary_gap(a, b, k, t_alone) for a, b in zip(t_d, t_p, strict=True)]
            assert all(type(g) is float for g in got)
            assert got == arr.tolist()
