"""Interference of concurrent partitions (latency/interference.py): the menu-wide table equals the
scalar path bit for bit, "none" is the bare roofline with its HBM cap, and the published
coefficients only ever slow either side, within their stated ceilings."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_duet.latency import Batch, Calibration, LatencyModel, get_hardware, get_model
from sglang_duet.latency.contention import combine
from sglang_duet.latency.interference import PUBLISHED, Interference, resolve_interference

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODELS = st.sampled_from([("qwen3-8b", 1), ("qwen3-8b", 2), ("qwen3-14b", 4),
                          ("llama-3.1-8b", 1)])
HARDWARE = st.sampled_from(["h100-sxm", "h200", "a100-80g"])
rows = st.tuples(st.one_of(st.just(1), st.integers(2, 40000)), st.integers(0, 300000))
COEFFS = st.builds(Interference, st.floats(0.0, 1.0), st.floats(0.0, 2.0),
                   st.one_of(st.just(math.inf), st.floats(0.0, 1.0)), st.floats(0.0, 1.0))


def _lm(model="qwen3-8b", hw="h100-sxm", tp=1, cal=None, inter="published"):
    return LatencyModel(get_hardware(hw), get_model(model, tp), cal, inter)


def _batch(pairs):
    return Batch(np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs],
                                                                       np.int64))


def _menu(data, total):
    sd = data.draw(st.lists(st.integers(2, total - 2), min_size=1, max_size=70))
    sd = tuple(s - s % 2 for s in sd)
    return sd, tuple(total - s for s in sd)


@SETTINGS
@given(st.lists(st.integers(0, 300000), max_size=300), st.lists(rows, max_size=12), MODELS,
       HARDWARE, st.one_of(st.just("published"), COEFFS), st.booleans(), st.data())
def test_table_equals_predict_concurrent(ctx, pre, model, hw, inter, calibrated, data):
    cal = Calibration.load("published-h100") if calibrated else None
    lm = _lm(model[0], hw, model[1], cal, inter)
    dec, pb = Batch.decode_steps(ctx), _batch(pre)
    sd, sp = _menu(data, lm.hardware.num_sms)
    tab = lm.predict_concurrent_table(dec, pb, sd, sp)
    for i, (a, b) in enumerate(zip(sd, sp, strict=True)):
        d, p = lm.predict_concurrent(dec, pb, a, b)
        assert (tab.decode_s[i], tab.prefill_s[i]) == (d.total_s, p.total_s)
        # each side alone is what predict gives, whatever the interference
        assert tab.decode_alone_s[i] == lm.predict(dec, a, host="lookahead").total_s
        after = "lookahead" if dec.tokens else None  # the prefill launched after step 0
        assert tab.prefill_alone_s[i] == lm.predict(pb, b, host="spatial", after=after).total_s


@SETTINGS
@given(st.lists(st.integers(0, 300000), max_size=200), st.lists(rows, min_size=1, max_size=12),
       MODELS, HARDWARE, st.data())
def test_none_and_zero_coefficients_reproduce_the_cap_alone(ctx, pre, model, hw, data):
    """'none' is today's model: each side alone, then the HBM cap; zero coefficients change no
    bit of it (x + 0 * y == x)."""
    dec, pb = Batch.decode_steps(ctx), _batch(pre)
    bare = _lm(model[0], hw, model[1], None, "none")
    zero = _lm(model[0], hw, model[1], None, Interference(0.0, 0.0, 0.0, 0.0))
    sd, sp = _menu(data, bare.hardware.num_sms)
    assert bare.interference is None
    for a, b in zip(sd, sp, strict=True):
        d = bare.predict(dec, a, host="lookahead")
        p = bare.predict(pb, b, host="spatial", after="lookahead" if dec.tokens else None)
        want = combine(bare.bandwidth_cap, d, p)
        assert bare.predict_concurrent(dec, pb, a, b) == want
        assert tuple(x.total_s for x in zero.predict_concurrent(dec, pb, a, b)) == tuple(
            x.total_s for x in want)
    t0, t1 = bare.predict_concurrent_table(dec, pb, sd, sp), zero.predict_concurrent_table(
        dec, pb, sd, sp)
    assert np.array_equal(t0.decode_s, t1.decode_s) and np.array_equal(t0.prefill_s,
                                                                        t1.prefill_s)


@SETTINGS
@given(st.integers(1, 256), st.integers(0, 131072), st.integers(2, 32768), st.integers(0, 65536),
       st.integers(2, 130), HARDWARE)
def test_published_only_slows_and_stays_under_its_ceilings(n, ctx, q, c, sd, hw):
    lm, bare = _lm(hw=hw), _lm(hw=hw, inter="none")
    sd = min(sd - sd % 2, lm.hardware.num_sms - 2)
    sp = lm.hardware.num_sms - sd
    dec, pre = Batch.decode(n, ctx), Batch([q], [c])
    d0 = lm.predict(dec, sd, host="lookahead")
    p0 = lm.predict(pre, sp, host="spatial", after="lookahead")  # launched after decode step 0
    d1, p1 = lm.predict_concurrent(dec, pre, sd, sp)
    d2, p2 = bare.predict_concurrent(dec, pre, sd, sp)
    inter = PUBLISHED[hw]
    # never faster than the bare model (the cap on the alone times), nor than alone
    assert d1.total_s >= d2.total_s >= d0.total_s and p1.total_s >= p2.total_s >= p0.total_s
    # on top of it: the decode within M of its overlap with the prefill, the prefill within B
    # of its time alone (u_d <= 1)
    overlap = min(d0.total_s, p0.total_s)
    assert d1.total_s - d2.total_s <= inter.decode_max * overlap * (1 + 1e-9)
    assert p1.total_s - p2.total_s <= inter.prefill_bandwidth * p0.total_s * (1 + 1e-9)


def test_decode_slows_with_the_prefills_compute_share():
    """A compute-bound prefill on more SMs slows the decode more; a tiny prefill hardly at all
    (MuxWise: 'from nearly zero to about 30%')."""
    lm = _lm()
    dec = Batch.decode(32, 4096)
    slow = []
    for sd in (100, 68, 36, 20):
        d0 = lm.predict(dec, sd, host="lookahead").total_s
        d1 = lm.predict_concurrent(dec, Batch([8192], [0]), sd, 132 - sd)[0].total_s
        slow.append(d1 / d0 - 1.0)
    assert slow == sorted(slow) and slow[0] > 0.0
    assert slow[-1] <= PUBLISHED["h100-sxm"].decode_max * (1 + 1e-9)
    # a 16-token prefill streams the weights: memory-bound, hardly any tensor work (x_p ~ 0):
    # on top of the HBM cap's share of the slowdown, interference adds next to nothing
    big, tiny = Batch.decode(256, 4096), Batch([16], [0])
    d0 = lm.predict(big, 100, host="lookahead").total_s
    d1 = lm.predict_concurrent(big, tiny, 100, 32)[0].total_s
    d2 = _lm(inter="none").predict_concurrent(big, tiny, 100, 32)[0].total_s
    assert 0.0 <= (d1 - d2) / d0 < 0.005


def test_empty_side_is_not_slowed():
    lm = _lm()
    dec = Batch.decode(32, 8192)
    d, p = lm.predict_concurrent(dec, [], 66, 66)
    assert d == lm.predict(dec, 66, host="lookahead") and p.total_s == 0
    tab = lm.predict_concurrent_table(dec, [], (66, 40), (66, 92))
    assert np.array_equal(tab.decode_s, tab.decode_alone_s)


def test_resolution():
    h100 = get_hardware("h100-sxm")
    assert resolve_interference("published", h100) is PUBLISHED["h100-sxm"]
    assert resolve_interference("published", get_hardware("h200")) is PUBLISHED["h100-sxm"]
    assert resolve_interference("none", h100) is None and resolve_interference(None, h100) is None
    cpu = replace(h100, name="cpu")  # the runtime's CPU profile: no published figure
    assert resolve_interference("published", cpu) is None
    with pytest.raises(ValueError, match="accepted: published, none"):
        resolve_interference("measured", h100)
    with pytest.raises(ValueError, match=">= 0"):
        Interference(0.1, -0.1, 0.3, 0.1)
