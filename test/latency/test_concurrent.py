from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_duet.latency import Batch


def _alone(lm, dec, pre, sd, sp):
    """Each side of `predict_concurrent` alone on its partition (a look-ahead decode step; the
    prefill carrying the spatial iteration's host once-costs, launched after decode step 0)."""
    return (lm.predict(dec, sd, host="lookahead"),
            lm.predict(pre, sp, host="spatial", after="lookahead"))


def _overlap_bandwidth(lm, dec, pre, sd, sp):
    """Combined HBM B/s while both partitions run (the shorter side's whole life)."""
    d0, p0 = _alone(lm, dec, pre, sd, sp)
    d1, p1 = lm.predict_concurrent(dec, pre, sd, sp)
    if d1.total_s <= p1.total_s:
        short0, short1, long0 = d0, d1, p0
    else:
        short0, short1, long0 = p0, p1, d0
    window = short1.total_s
    # the long side did `short0.total_s / short1.total_s` of its standalone pace in the window
    long_bytes = long0.bytes / long0.total_s * short0.total_s
    return (short0.bytes + long_bytes) / window


class TestContention:
    def test_memory_bound_decode_slows_next_to_a_prefill(self, make_lm):
        lm = make_lm()
        # a short prefill streams the weights: memory-bound on its 32 SMs, like the decode
        dec, pre = Batch.decode(64, 16384), Batch.prefill(64)
        alone = lm.predict(dec, 100, host="lookahead")
        together, _ = lm.predict_concurrent(dec, pre, 100, 32)
        assert together.total_s > alone.total_s
        assert together.attention_s > alone.attention_s  # components scale with it

    def test_no_contention_when_demand_fits(self, make_lm):
        lm = make_lm()
        dec, pre = Batch.decode(1, 100), Batch.prefill(16)
        assert lm.predict_concurrent(dec, pre, 20, 20) == _alone(lm, dec, pre, 20, 20)

    def test_empty_side(self, make_lm):
        lm = make_lm()
        dec = Batch.decode(32, 8192)
        d, p = lm.predict_concurrent(dec, [], 66, 66)
        assert d == lm.predict(dec, 66, host="lookahead") and p.total_s == 0

    def test_partitions_must_fit_the_device(self, make_lm):
        with pytest.raises(ValueError, match="exceed"):
            make_lm().predict_concurrent([(1, 10)], [(100, 0)], 100, 40)

    @settings(max_examples=60, deadline=None)
    @given(
        n=st.integers(1, 256),
        ctx=st.integers(0, 65536),
        q=st.integers(2, 16384),
        sd=st.integers(2, 130),
    )
    def test_never_exceeds_device_bandwidth(self, make_lm, n, ctx, q, sd):
        lm = make_lm()
        sd = sd - sd % 2
        sp = 132 - sd
        dec, pre = Batch.decode(n, ctx), Batch.prefill(q)
        d0, p0 = _alone(lm, dec, pre, sd, sp)
        d1, p1 = lm.predict_concurrent(dec, pre, sd, sp)
        assert d1.total_s >= d0.total_s and p1.total_s >= p0.total_s  # never helps
        assert _overlap_bandwidth(lm, dec, pre, sd, sp) <= lm.hardware.hbm_bw * (1 + 1e-9)
        makespan = max(d1.total_s, p1.total_s)
        assert (d1.bytes + p1.bytes) / makespan <= lm.hardware.hbm_bw
