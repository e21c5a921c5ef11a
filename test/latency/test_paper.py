"""DuetServe's H100 measurements (Obs. 1 and 2), reproduced by the uncalibrated model."""

from __future__ import annotations

from sglang_duet.latency import Batch


def test_8k_prefill_iteration_exceeds_180ms(make_lm):
    assert make_lm().predict([(8192, 0)]).total_s > 0.180


def test_attention_is_about_a_quarter_of_8k_prefill(make_lm):
    b = make_lm().predict([(8192, 0)])
    assert 0.15 < b.attention_s / b.total_s < 0.35


def test_decode_grows_over_4x_from_1k_to_32k(make_lm):
    lm = make_lm()
    short = lm.predict(Batch.decode(8, 1024)).total_s
    long = lm.predict(Batch.decode(8, 32768)).total_s
    assert long / short > 4.0
