"""Hypothesis-fuzzed batches: never NaN, negative or infinite."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_duet.latency import Batch, Calibration

requests = st.lists(st.tuples(st.integers(0, 32768), st.integers(0, 262144)), max_size=300)


def _check(b):
    values = (b.total_s, b.token_ops_s, b.attention_s, b.comm_s, b.lm_head_s, b.flops, b.bytes)
    assert all(math.isfinite(v) and v >= 0 for v in values)
    assert b.total_s >= max(b.token_ops_s, b.attention_s, b.comm_s, b.lm_head_s)


@settings(max_examples=150, deadline=None)
@given(
    reqs=requests,
    sms=st.one_of(st.none(), st.integers(1, 132)),
    tp=st.sampled_from([1, 2, 4, 8, 16]),
    model=st.sampled_from(["qwen3-8b", "qwen3-14b", "llama-3.1-8b"]),
    hardware=st.sampled_from(["h100-sxm", "h200", "a100-80g"]),
    data=st.data(),
)
def test_predict_is_finite(make_lm, reqs, sms, tp, model, hardware, data):
    if model == "qwen3-14b" and tp == 16:
        tp = 8  # 40 heads do not split 16 ways
    lm = make_lm(model, hardware, tp)
    if sms is not None:
        sms = min(sms, lm.hardware.num_sms)
    q = np.array([r[0] for r in reqs], dtype=np.int64)
    c = np.array([r[1] for r in reqs], dtype=np.int64)
    sample = data.draw(st.lists(st.booleans(), min_size=len(reqs), max_size=len(reqs)))
    b = lm.predict(Batch(q, c, np.array(sample, dtype=bool)), sms)
    _check(b)
    if q.sum() > 0:
        assert b.total_s > 0


@settings(max_examples=60, deadline=None)
@given(
    reqs=requests,
    effs=st.lists(st.floats(0.01, 1.0), min_size=9, max_size=9),
    overhead=st.floats(0, 1e-3),
    sms=st.integers(1, 132),
)
def test_any_calibration_is_finite(make_lm, reqs, effs, overhead, sms):
    cal = Calibration(**dict(zip(Calibration.efficiency_names(), effs, strict=True)),
                      iteration_overhead_s=overhead)
    lm = make_lm(tp=2, calibration=cal)
    _check(lm.predict(reqs, sms))
    if sms <= 130:
        dec = [(1, c) for _, c in reqs[:50]]
        for side in lm.predict_concurrent(dec, reqs[50:], sms, 132 - sms):
            _check(side)
