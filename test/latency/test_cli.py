from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers.cli import run_cli
from sglang_duet.latency import Calibration
from sglang_duet.latency.cli import JSON_KEYS, main

BASE = ["explain", "--model", "qwen3-8b", "--hardware", "h100-sxm"]


def _run(capsys, argv):
    return run_cli(main, capsys, argv)


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

    def test_hardware_alias_is_the_profile(self, capsys):
        rc, short, _ = _run(capsys, ["explain", "--model", "qwen3-8b", "--hardware", "h100",
                                     "--prefill", "512", "--json"])
        assert rc == 0
        assert _run(capsys, BASE + ["--prefill", "512", "--json"])[1] == short

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
