"""Start-up checks (#16 item 8) as functions; the launcher's exit 2 is in test_launch_server."""

from __future__ import annotations

import argparse
import os
import socket

import pytest

from sglang_duet.server import startup


@pytest.fixture(scope="module")
def parser():
    from sglang_duet.launch_server import build_parser

    return build_parser()


@pytest.mark.parametrize("argv, dest", [
    (["--max-total-tok", "999"], "max_total_tokens"),
    (["--attention-back", "triton"], "attention_backend"),
    (["--attention-backend=triton"], "attention_backend"),
    (["--duet-tbt-s", "50"], "duet_tbt_slo_ms"),
])
def test_abbreviations_count_as_explicit(parser, argv, dest):
    """The CPU defaults must not override a flag given in abbreviated form."""
    assert dest in startup.explicit_dests(parser, argv)
    ns = parser.parse_args(argv)
    assert getattr(ns, dest) is not None
    assert parser.get_default(dest) is not argparse.SUPPRESS  # defaults restored afterwards


def test_cpu_settings_keep_an_abbreviated_flag(parser):
    from sglang_duet.cpu import apply_cpu_settings

    argv = ["--max-total-tok", "999"]
    ns = parser.parse_args(argv)
    apply_cpu_settings(ns, startup.explicit_dests(parser, argv))
    assert ns.max_total_tokens == 999


def test_model_path(tmp_path):
    assert "path does not exist" in startup.check_model_path("/nonexistent")
    assert "path does not exist" in startup.check_model_path("./nope/model")
    assert startup.check_model_path(str(tmp_path)) is None
    assert startup.check_model_path("Qwen/Qwen3-8B") is None  # a repo id, left to SGLang


def test_busy_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        reason = startup.check_port("127.0.0.1", port)
    assert f"--port {port}" in reason and "in use" in reason
    assert startup.check_port("127.0.0.1", port) is None


def test_calibration(tmp_path):
    assert startup.check_calibration(None) is None
    assert startup.check_calibration("default") is None
    reason = startup.check_calibration(str(tmp_path / "missing.json"))
    assert reason.startswith("--duet-calibration ") and "missing.json" in reason


def test_plan_log(tmp_path):
    assert startup.check_plan_log(str(tmp_path / "plan")) is None
    assert "does not exist" in startup.check_plan_log(str(tmp_path / "no" / "plan"))
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as root: permissions are not enforced")
        assert "not writable" in startup.check_plan_log(str(ro / "plan"))
    finally:
        os.chmod(ro, 0o700)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_plan_log_on_a_read_only_file_system():
    assert "not writable" in startup.check_plan_log("/proc/plan")  # read-only, root included


@pytest.mark.parametrize("name", ["green-ctx", "libsmctrl"])
def test_explicit_gpu_backend_without_gpu_fails(name):
    reason = startup.check_partition_backend(name, has_gpu=False)
    assert reason.startswith(f"--duet-partition-backend {name}") and "auto" in reason
    assert startup.check_partition_backend("auto", has_gpu=False) is None
    assert startup.check_partition_backend("none", has_gpu=False) is None
