"""`python -m sglang_duet.partition` on a CPU machine, and import hygiene."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sglang_duet.partition.__main__ import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize(
    "hw,first,last",
    [("h100", "16/116*", "112/20*"), ("h200", "16/116*", "112/20*"), ("a100", "16/92*", "92/16*")],
)
def test_hypothetical_hardware(capsys, hw, first, last):
    assert main(["--hardware", hw]) == 0
    out = capsys.readouterr().out
    for name in ("green-ctx", "libsmctrl", "none"):
        assert name in out
    assert "selected:" in out
    assert first in out and last in out


@pytest.mark.usefixtures("no_driver")
def test_cpu_report(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "unavailable" in out and "no CUDA driver" in out
    assert "selected: auto -> none" in out
    assert "--hardware" in out


def test_import_does_not_pull_torch():
    code = (
        "import sys, sglang_duet.partition as p; p.probe_all(); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH", "")]
        ),
    )
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
