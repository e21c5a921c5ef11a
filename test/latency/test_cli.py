from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_duet.latency import Batch, Calibration
from sglang_duet.latency.cli import JSON_KEYS, main
from sglang_duet.latency.samples import Sample, write_samples

BASE = ["explain", "--model", "qwen3-8b", "--hardware", "h100-sxm"]


def _run(capsys, argv):
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse errors
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


class TestExplain:
    def test_json(self, capsys, make_lm):
        rc, out, _ = _run(capsys, BASE + ["--prefill", "8192", "--decode", "8x32768", "--json"])
        assert rc == 0
        data = json.loads(out)
        assert tuple(data) == JSON_KEYS
        expect = make_lm().predict([(8192, 0)] + [(1, 32768)] * 8)
        assert data["total_s"] == pytest.approx(expect.total_s)
        assert data["bytes"] == pytest.approx(expect.bytes)

    def test_prefill_with_context_sms_tp(self, capsys, make_lm):
        rc, out, _ = _run(capsys, ["explain", "--model", "qwen3-14b", "--hardware", "h200",
                                   "--tp", "2", "--sms", "64", "--prefill", "2048@4096", "--json"])
        assert rc == 0
        expect = make_lm("qwen3-14b", "h200", tp=2).predict([(2048, 4096)], 64)
        assert expect.comm_s > 0
        assert json.loads(out)["comm_s"] == pytest.approx(expect.comm_s)

    def test_table(self, capsys):
        rc, out, _ = _run(capsys, BASE + ["--prefill", "8192"])
        assert rc == 0 and "attn_prefill" in out and "gate_up_proj" in out and "total" in out

    def test_calibration_file(self, capsys, tmp_path):
        path = tmp_path / "slow.json"
        Calibration(name="slow", gemm_compute=0.3).save(path)
        _, fast, _ = _run(capsys, BASE + ["--prefill", "8192", "--json"])
        rc, slow, _ = _run(capsys, BASE + ["--prefill", "8192", "--json", "--calibration",
                                           str(path)])
        assert rc == 0
        assert json.loads(slow)["total_s"] > json.loads(fast)["total_s"]

    @pytest.mark.parametrize(
        "argv, needle",
        [
            (["explain", "--model", "qwen9", "--hardware", "h100-sxm", "--prefill", "1"],
             "qwen3-8b"),
            (["explain", "--model", "qwen3-8b", "--hardware", "b200", "--prefill", "1"],
             "h100-sxm"),
            (BASE + ["--prefill", "8k"], "Q@C"),
            (BASE + ["--prefill", "0"], "Q@C"),
            (BASE + ["--decode", "8@100"], "NxC"),
            (BASE + ["--decode", "0x5"], "NxC"),
            (BASE, "--prefill"),
            (BASE + ["--sms", "500", "--prefill", "5"], "1..132"),
            (BASE + ["--calibration", "nope", "--prefill", "5"], "default"),
            (["explain", "--model", "qwen3-8b"], "--hardware"),
        ],
    )
    def test_errors_are_one_line_exit_2(self, capsys, argv, needle):
        rc, out, err = _run(capsys, argv)
        assert rc == 2 and out == ""
        assert len(err.strip().splitlines()) == 1 and needle in err


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
        rc, out, _ = _run(capsys, ["calibrate", "--samples", str(csv_path), "--out",
                                   str(out_path)])
        assert rc == 0
        assert "held-out: n=3 MAPE=" in out and "P90=" in out
        cal = Calibration.load(out_path)
        assert cal.name == "h200-fit" and cal.gemm_compute == pytest.approx(0.6, rel=0.02)

    def test_bad_csv(self, capsys, tmp_path):
        path = tmp_path / "bad.csv"
        path.write_text("hardware,model\nh200,qwen3-8b\n")
        rc, _, err = _run(capsys, ["calibrate", "--samples", str(path), "--out",
                                   str(tmp_path / "o.json")])
        assert rc == 2 and "missing columns" in err


def test_module_entry_point():
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.path.join(root, "python")
    proc = subprocess.run(
        [sys.executable, "-m", "sglang_duet.latency", *BASE, "--decode", "8x1024", "--json"],
        capture_output=True, text=True, env=env, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["total_s"] > 0
    bad = subprocess.run([sys.executable, "-m", "sglang_duet.latency", *BASE, "--decode", "x"],
                         capture_output=True, text=True, env=env, check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


class TestCalibratePublished:
    CSV = Path(__file__).resolve().parents[2] / "benchmark/latency_model/published/reference.csv"

    def test_kfold_fit_of_the_reference_set(self, capsys, tmp_path):
        out_path = tmp_path / "pub.json"
        rc, out, _ = _run(capsys, ["calibrate", "--published", str(self.CSV), "--gpus",
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
        rc, _, err = _run(capsys, ["calibrate", "--published", str(self.CSV), "--out",
                                   str(tmp_path / "o.json"), *argv])
        assert rc == 2 and needle in err

    def test_needs_one_source(self, capsys, tmp_path):
        rc, _, err = _run(capsys, ["calibrate", "--out", str(tmp_path / "o.json")])
        assert rc == 2 and "exactly one of" in err
