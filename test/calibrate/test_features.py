"""The fitter's design matrix (`calibrate.features`) predicts what `LatencyModel` predicts."""

from __future__ import annotations

import numpy as np

from sglang_duet.calibrate.features import build_features
from sglang_duet.calibrate.samples import Sample
from sglang_duet.latency import Batch

MIXED = [(1, 4096), (1, 300), (2048, 0), (512, 10000), (1, 70000)]


def test_features_reproduce_predict(make_lm):
    lm = make_lm(hardware="a100-80g", tp=2)
    batches = [MIXED, [(8192, 0)], [(1, 100)] * 30]
    samples = [Sample("a100-80g", "qwen3-8b", 2, sms, Batch.from_pairs(b), 1.0)
               for b in batches for sms in (None, 40)]
    feat = build_features(samples)
    cal = lm.calibration
    pred = feat.predict(feat.to_vector(cal),
                        feat.curve(lm.hardware.bw_knee, lm.hardware.bw_hill))
    expect = [lm.predict(s.batch, s.sms).total_s for s in samples]
    np.testing.assert_allclose(pred, expect, rtol=1e-12)
