"""The look-ahead delivery check's figures on made-up arrivals and plan logs (no server)."""

from __future__ import annotations

import pytest

from benchmark.gpu.delivery import (
    MAX_SHARE,
    MIN_EXPECTED,
    delivery_summary,
    expected_if_bunched,
)

T_D = 0.010  # seconds per decode step


def spatial_rows(k: int, n_d: int, iters: int) -> list[dict]:
    return [{"mode": "spatial", "decode_rids": [f"d{i}" for i in range(n_d)], "lookahead": k,
             "decode_steps": k, "predicted_decode_s": T_D} for _ in range(iters)]


def per_step(n: int) -> list[tuple[float, int]]:
    return [(j * T_D, 1) for j in range(n)]


def k_at_a_time(n: int, k: int) -> list[tuple[float, int]]:
    """Step j's token arrives with the rest of its iteration, 0.1 ms after the one before."""
    return [((j // k + 1) * k * T_D + (j % k) * 1e-4, 1) for j in range(n)]


def test_expected_share_counts_look_ahead_tokens_after_each_iterations_first():
    rows = spatial_rows(4, 2, 3) + [{"mode": "aggregated", "decode_rids": ["a", "b"],
                                    "lookahead": 1, "decode_steps": 0}]
    # spatial: 3 iterations x 2 decodes x 4 steps = 24 tokens, 18 after each first step; + 2
    assert expected_if_bunched(rows) == pytest.approx(18 / 26)
    assert expected_if_bunched([]) == 0.0


def test_per_step_delivery_passes_and_k_at_a_time_fails():
    rows = spatial_rows(4, 8, 10)
    good = delivery_summary([per_step(40) for _ in range(8)], rows, judged=True)
    assert good["bunched_share"] == 0.0 and good["ok"] is True
    assert good["client_gap_p50_ms"] == pytest.approx(T_D * 1e3)
    bad = delivery_summary([k_at_a_time(40, 4) for _ in range(8)], rows, judged=True)
    assert bad["expected_if_bunched"] == pytest.approx(0.75)
    assert bad["bunched_share"] > MAX_SHARE * bad["expected_if_bunched"] and bad["ok"] is False


def test_tokens_coalesced_into_one_chunk_count_as_bunched():
    rows = spatial_rows(4, 1, 10)
    chunks = [(j * 4 * T_D, 4) for j in range(10)]  # every iteration's 4 tokens in one chunk
    out = delivery_summary([chunks], rows, judged=True)
    assert out["bunched_share"] == pytest.approx(0.75) and out["ok"] is False


def test_not_judged_without_streams_or_without_look_ahead():
    rows = spatial_rows(4, 8, 10)
    cpu = delivery_summary([k_at_a_time(40, 4)], rows, judged=False)
    assert cpu["ok"] is None and cpu["bunched_share"] > 0.5 and "not judged" in cpu["note"]
    few = spatial_rows(1, 8, 10)  # k = 1: nothing to bunch, nothing to tell
    out = delivery_summary([per_step(10)], few, judged=True)
    assert out["expected_if_bunched"] < MIN_EXPECTED and out["ok"] is None and "note" in out
