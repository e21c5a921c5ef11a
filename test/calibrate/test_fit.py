from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from sglang_duet.calibrate.fit import (
    calibrate,
    calibrate_kfold,
    fit_efficiencies,
    kfold_predictions,
    relative_errors,
)
from sglang_duet.calibrate.samples import (
    Sample,
    format_batch,
    parse_batch,
    read_samples,
    write_samples,
)
from sglang_duet.latency import Batch, Calibration, LatencyModel, get_hardware, get_model

TRUE = Calibration(
    gemm_compute=0.62, gemm_bw=0.78, elementwise_bw=0.70, attn_prefill_compute=0.52,
    attn_decode_bw=0.66, link=0.70, iteration_overhead_s=40e-6, bw_knee=0.2, bw_hill=2.5,
    launch_layer_s=60e-6, request_overhead_s=8e-6,
)
HOST = ("iteration_overhead_s", "launch_layer_s", "request_overhead_s")
EXCITED = ("gemm_compute", "gemm_bw", "elementwise_bw", "attn_prefill_compute", "attn_decode_bw")


def _synthetic(cal: Calibration, sms_list=(None, 66, 32, 16), tps=(1,), noise=0.0, seed=0):
    """Samples a model with calibration `cal` would measure on an H200."""
    rng = np.random.default_rng(seed)
    out = []
    for tp in tps:
        lm = LatencyModel(get_hardware("h200"), get_model("qwen3-8b", tp), cal)
        batches = [Batch.prefill(q, c) for q in (512, 2048, 8192) for c in (0, 8192)]
        batches += [Batch.decode(n, c) for n in (1, 8, 64) for c in (1024, 8192, 32768)]
        batches.append(Batch.from_pairs([(1, 4096)] * 16 + [(1024, 0)]))
        for sms in sms_list:
            for b in batches:
                t = lm.predict(b, sms).total_s * float(np.exp(rng.normal(0.0, noise)))
                out.append(Sample("h200", "qwen3-8b", tp, sms, b, t))
    return out


class TestFit:
    def test_recovers_known_factors_and_curve(self):
        cal = fit_efficiencies(_synthetic(TRUE))
        for key in EXCITED + ("bw_knee", "bw_hill"):
            assert getattr(cal, key) == pytest.approx(getattr(TRUE, key), rel=0.02), key
        for key in HOST:  # the host term: per pass, per eager layer, per sampling row
            assert getattr(cal, key) == pytest.approx(getattr(TRUE, key), rel=0.02), key

    def test_unexercised_factors_keep_the_prior(self):
        prior = Calibration(attn_decode_compute=0.33)
        cal = fit_efficiencies(_synthetic(TRUE), prior=prior)
        assert cal.attn_decode_compute == 0.33  # decode attention is never compute-bound here
        assert cal.link == prior.link  # no TP samples

    def test_recovers_link_with_tp(self):
        cal = fit_efficiencies(_synthetic(TRUE, sms_list=(None,), tps=(1, 2)))
        assert cal.link == pytest.approx(TRUE.link, rel=0.02)
        assert cal.gemm_compute == pytest.approx(TRUE.gemm_compute, rel=0.02)
        assert cal.bw_knee is None  # no partitioned samples: the curve is not refitted

    def test_heldout_errors_with_noise(self):
        samples = _synthetic(TRUE, noise=0.03, seed=1)
        result = calibrate(samples)
        assert result.n_heldout == len(samples) // 5
        assert 0.005 < result.heldout_mape < 0.06
        assert result.heldout_p90 >= result.heldout_mape * 0.9
        # the dominant factors survive the noise; elementwise ops (<10% of any sample) do not
        for key in ("gemm_compute", "gemm_bw", "attn_prefill_compute", "attn_decode_bw"):
            assert getattr(result.calibration, key) == pytest.approx(getattr(TRUE, key), rel=0.1)

    def test_default_calibration_misfits_synthetic_truth(self):
        # the fit is doing the work: the prior alone is far off these samples
        assert relative_errors(_synthetic(TRUE), Calibration()).mean() > 0.05

    def test_one_hardware_per_partitioned_fit(self):
        s = _synthetic(TRUE, sms_list=(None, 66))
        other = Sample("h100-sxm", "qwen3-8b", 1, None, Batch.prefill(10), 0.01)
        with pytest.raises(ValueError, match="one hardware"):
            fit_efficiencies(s + [other])

    def test_whole_device_samples_of_two_gpus_fit_together(self):
        both = (_synthetic(TRUE, sms_list=(None,))
                + [replace(s, hardware="h100-sxm", seconds=t) for s, t in zip(
                    _synthetic(TRUE, sms_list=(None,)), _h100_times(TRUE), strict=True)])
        cal = fit_efficiencies(both)
        for key in ("gemm_bw", "attn_decode_bw", "iteration_overhead_s"):
            assert getattr(cal, key) == pytest.approx(getattr(TRUE, key), rel=0.02), key

    def test_kept_parameters_stay_at_the_prior(self):
        cal = fit_efficiencies(_synthetic(TRUE), keep=("gemm_bw",))
        assert cal.gemm_bw == Calibration().gemm_bw
        with pytest.raises(ValueError, match="unknown parameters"):
            fit_efficiencies(_synthetic(TRUE), keep=("gemm_speed",))

    def test_kfold_predictions_are_out_of_sample(self):
        samples = _synthetic(TRUE, sms_list=(None,), noise=0.02, seed=3)
        pred = kfold_predictions(samples, 4)
        # a held-out sample's own value does not move its prediction
        moved = [replace(s, seconds=s.seconds * 3.0) if i == 5 else s
                 for i, s in enumerate(samples)]
        assert kfold_predictions(moved, 4)[5] == pytest.approx(pred[5], rel=1e-12)
        result = calibrate_kfold(samples, 4)
        assert result.n_heldout == len(samples) and 0 < result.heldout_mape < 0.08
        with pytest.raises(ValueError, match="k-fold"):
            kfold_predictions(samples, 1)


def _h100_times(cal):
    lm = LatencyModel(get_hardware("h100-sxm"), get_model("qwen3-8b"), cal)
    return [lm.predict(s.batch).total_s for s in _synthetic(cal, sms_list=(None,))]


class TestPersistence:
    def test_round_trip_by_path_and_name(self, tmp_path):
        path = tmp_path / "h200-test.json"
        TRUE.save(path)
        assert Calibration.load(path) == TRUE
        assert Calibration.load("h200-test", search_dir=tmp_path) == TRUE
        assert json.loads(path.read_text())["gemm_compute"] == 0.62

    def test_default_is_builtin(self, tmp_path):
        assert Calibration.load("default", search_dir=tmp_path) == Calibration()

    def test_unknown_name(self, tmp_path):
        (tmp_path / "mine.json").write_text(json.dumps({"name": "mine"}))
        with pytest.raises(ValueError, match="mine"):
            Calibration.load("yours", search_dir=tmp_path)

    def test_rejects_bad_values(self, tmp_path):
        with pytest.raises(ValueError, match="unknown calibration keys"):
            Calibration.from_dict({"gemm_speed": 1.0})
        with pytest.raises(ValueError):
            Calibration(gemm_compute=0.0)
        with pytest.raises(ValueError):
            Calibration(bw_knee=0.2)

    def test_calibration_changes_predictions(self):
        hw, m = get_hardware("h100-sxm"), get_model("qwen3-8b")
        slow = Calibration(gemm_compute=0.375)
        b = [(8192, 0)]
        t0 = LatencyModel(hw, m).predict(b)
        t1 = LatencyModel(hw, m, slow).predict(b)
        assert t1.token_ops_s > 1.8 * (t0.token_ops_s - 0.03)
        assert t1.attention_s == t0.attention_s


class TestSamplesCsv:
    def test_parse_and_format(self):
        b = parse_batch("8x1@32768;2048@4096; 3x16")
        assert b.pairs() == [(1, 32768)] * 8 + [(2048, 4096)] + [(16, 0)] * 3
        assert format_batch(b) == "8x1@32768;2048@4096;3x16@0"
        assert parse_batch(format_batch(b)).pairs() == b.pairs()

    @pytest.mark.parametrize("bad", ["", "8y1@3", "0@5", "0x1@2", "1@-3", "a", "1@2@3"])
    def test_bad_specs(self, bad):
        with pytest.raises(ValueError, match=r"\[N x\]Q\[@C\]"):
            parse_batch(bad)

    def test_round_trip(self, tmp_path):
        samples = _synthetic(TRUE, sms_list=(None, 40))
        path = tmp_path / "s.csv"
        assert write_samples(path, samples) == len(samples)
        back = read_samples(path)
        assert [(s.sms, s.batch.pairs()) for s in back] == [
            (s.sms, s.batch.pairs()) for s in samples]
        np.testing.assert_allclose([s.seconds for s in back], [s.seconds for s in samples],
                                   rtol=1e-8)

    def test_bad_row_names_line(self, tmp_path):
        path = tmp_path / "s.csv"
        path.write_text("hardware,model,tp,sms,batch,seconds\nh200,qwen3-8b,1,,8x1@10,0.01\n"
                        "h200,qwen3-8b,1,,8x1@10,-1\n")
        with pytest.raises(ValueError, match=":3:"):
            read_samples(path)
