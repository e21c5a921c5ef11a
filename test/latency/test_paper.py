"""DuetServe's H100 measurements (Obs. 1 and 2), reproduced by the uncalibrated model."""

from __future__ import annotations

from sglang_duet.latency import Batch


def test_8k_prefill_iteration_exceeds_180ms(make_lm):
    assert make_lm().predict([(8192, 0)]).total_s > 0.180


def test_attention_is_about_a_quarter_of_8k_prefill(make_lm):
    b = make_lm().predict([(8192, 0)])
    assert 0.15 < b.attention_s / b.total_s < 0.35


def test_decode_grows_over_4x_from_1k_to_32k(make_lm):
    """Fig. 1c times the forward pass on the GPU: the serving loop's host time (`host_s`, ~1.8
    ms per CPU-scheduled step) is not in it, so the ratio is of device time."""
    lm = make_lm()
    short = lm.predict(Batch.decode(8, 1024))
    long = lm.predict(Batch.decode(8, 32768))
    assert (long.total_s - long.host_s) / (short.total_s - short.host_s) > 4.0
