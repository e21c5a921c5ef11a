"""The equality step's verdict: equal outputs, a near-tie of the top-2 logprobs, or a real
divergence (benchmark/gpu/equality.py)."""

from __future__ import annotations

from benchmark.gpu.equality import TIE_MARGIN, classify, compare_with_margin, top2


def _top(*pairs):
    """One position's SGLang top-logprobs entry: [[logprob, id, text], ...]."""
    return [[lp, tid, None] for lp, tid in pairs]


def test_top2_reads_sglangs_entries():
    assert top2(_top((-0.1, 7), (-2.0, 3))) == ((-0.1, 7), (-2.0, 3))
    assert top2(_top((-0.1, 7))) is None and top2(None) is None


def test_equal_outputs():
    assert classify([1, 2], [1, 2], [], [])["verdict"] == "equal"


def test_a_near_tie_with_swapped_runner_up_passes():
    a, b = [5, 7, 1], [5, 8, 2]
    ta = [_top((-0.1, 5), (-3, 9)), _top((-0.70, 7), (-0.72, 8)), _top((-1, 1), (-2, 2))]
    tb = [_top((-0.1, 5), (-3, 9)), _top((-0.69, 8), (-0.71, 7)), _top((-1, 2), (-2, 1))]
    r = classify(a, b, ta, tb)
    assert r["verdict"] == "near_tie" and r["position"] == 1 and r["runner_up_swapped"]
    assert max(r["margins"]) <= TIE_MARGIN


def test_a_clear_margin_is_a_divergence():
    a, b = [5, 7], [5, 8]
    ta = [_top((-0.1, 5), (-3, 9)), _top((-0.1, 7), (-2.5, 8))]
    tb = [_top((-0.1, 5), (-3, 9)), _top((-0.1, 8), (-2.5, 7))]
    assert classify(a, b, ta, tb)["verdict"] == "diverged"


def test_a_token_outside_the_top2_is_a_divergence():
    a, b = [7], [4]
    ta, tb = [_top((-0.70, 7), (-0.71, 8))], [_top((-0.70, 4), (-0.71, 8))]
    r = classify(a, b, ta, tb)
    assert r["verdict"] == "diverged" and not r["runner_up_swapped"]


def test_missing_logprobs_or_lengths_are_divergences():
    assert classify([1, 2], [1, 3], [], [])["why"] == "no top-2 logprobs there"
    assert classify([1, 2], [1, 2, 3], [], [])["why"] == "lengths differ"


def test_compare_counts_and_ok():
    near = ([5, 7], [5, 8], [_top((0, 5), (-3, 9)), _top((-0.70, 7), (-0.72, 8))],
            [_top((0, 5), (-3, 9)), _top((-0.69, 8), (-0.71, 7))])
    same = ([1], [1], [], [])
    r = compare_with_margin([near[0], same[0]], [near[1], same[1]], [near[2], same[2]],
                            [near[3], same[3]])
    assert r["ok"] and r["equal"] == 1 and r["near_tie"] == 1 and r["diverged"] == 0
    assert r["differences"][0]["prompt"] == 0
    bad = compare_with_margin([[1]], [[2]], [[]], [[]])
    assert not bad["ok"] and bad["diverged"] == 1
