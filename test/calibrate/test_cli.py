"""`python -m sglang_duet.calibrate`: fits from a samples CSV and from the published set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli import run_cli
from sglang_duet.calibrate.cli import main
from sglang_duet.calibrate.samples import Sample, write_samples
from sglang_duet.latency import Batch, Calibration


def _run(capsys, argv):
    return run_cli(main, capsys, argv)


class TestCalibrate:
    def test_end_to_end(self, capsys, tmp_path, make_lm):
        lm = make_lm(hardware="h200", calibration=Calibration(gemm_compute=0.6, gemm_bw=0.7))
        samples = []
        for q in (256, 1024, 4096, 8192):
            for c in (0, 4096):
                b = Batch.prefill(q, c)
                samples.append(Sample("h200", "qwen3-8b", 1, None, b, lm.predict(b).total_s))
        for n in (1, 4, 16, 64):
            for c in (512, 8192):
                b = Batch.decode(n, c)
                samples.append(Sample("h200", "qwen3-8b", 1, None, b, lm.predict(b).total_s))
        csv_path, out_path = tmp_path / "s.csv", tmp_path / "h200-fit.json"
        write_samples(csv_path, samples)
        rc, out, _ = _run(capsys, ["--samples", str(csv_path), "--out",
                                   str(out_path)])
        assert rc == 0
        assert "held-out: n=3 MAPE=" in out and "P90=" in out
        cal = Calibration.load(out_path)
        assert cal.name == "h200-fit" and cal.gemm_compute == pytest.approx(0.6, rel=0.02)

    def test_bad_csv(self, capsys, tmp_path):
        path = tmp_path / "bad.csv"
        path.write_text("hardware,model\nh200,qwen3-8b\n")
        rc, _, err = _run(capsys, ["--samples", str(path), "--out",
                                   str(tmp_path / "o.json")])
        assert rc == 2 and "missing columns" in err


class TestCalibratePublished:
    CSV = Path(__file__).resolve().parents[2] / "benchmark/latency_model/published/reference.csv"

    def test_kfold_fit_of_the_reference_set(self, capsys, tmp_path):
        out_path = tmp_path / "pub.json"
        rc, out, _ = _run(capsys, ["--published", str(self.CSV), "--gpus",
                                   "h100-sxm,h200", "--kfold", "3", "--keep", "attn_decode_bw",
                                   "--out", str(out_path)])
        assert rc == 0 and "held-out: n=" in out
        cal = Calibration.load(out_path)
        assert cal.attn_decode_bw == Calibration().attn_decode_bw  # kept at the prior
        assert cal.heldout_mape is not None and cal.iteration_overhead_s > 0

    @pytest.mark.parametrize("argv,needle", [
        (["--gpus", "h300"], "no usable rows"),
        (["--keep", "gemm_speed"], "unknown parameters"),
    ])
    def test_bad_input(self, capsys, tmp_path, argv, needle):
        rc, _, err = _run(capsys, ["--published", str(self.CSV), "--out",
                                   str(tmp_path / "o.json"), *argv])
        assert rc == 2 and needle in err

    def test_needs_one_source(self, capsys, tmp_path):
        rc, _, err = _run(capsys, ["--out", str(tmp_path / "o.json")])
        assert rc == 2 and "exactly one of" in err


def test_module_entry_point(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "python")
    out = tmp_path / "o.json"
    proc = subprocess.run(
        [sys.executable, "-m", "sglang_duet.calibrate", "--published",
         str(TestCalibratePublished.CSV), "--gpus", "h100-sxm", "--out", str(out)],
        capture_output=True, text=True, env=env, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["n_samples"] > 0
    bad = subprocess.run([sys.executable, "-m", "sglang_duet.calibrate", "--out", str(out)],
                         capture_output=True, text=True, env=env, check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
