"""The `gpu`-marked tests resolve their fixtures, checked on a CPU machine.

Without CUDA, conftest.py skips every `gpu` test before fixture setup, so a fixture error in one
(a module-scoped fixture asking for a function-scoped one, a misspelt fixture name) would only
show on the GPU machine, in its 15 minutes (issue #47: every test of test_phases_gpu.py once
errored that way). `pytest --setup-plan` resolves the fixtures of each test without running any
fixture or test body; SGLANG_DUET_TEST_ASSUME_CUDA=1 makes conftest.py keep the gpu tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_ERRORS = ("ScopeMismatch", "fixture '", "ERROR at setup", "recursive dependency")


def setup_plan(*paths: str, cwd: Path = ROOT, extra: tuple[str, ...] = ()) -> dict:
    """Runs `pytest --setup-plan -m gpu` over `paths` with the gpu tests kept; returns the exit
    status, the output, the number of tests planned and the fixture errors found in it."""
    env = {**os.environ, "SGLANG_DUET_TEST_ASSUME_CUDA": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--setup-plan", "-p", "no:cacheprovider", "-m", "gpu",
         "-W", "ignore", *extra, *paths],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    text = out.stdout + out.stderr
    return {"rc": out.returncode, "output": text,
            "planned": len(re.findall(r"\(fixtures used: ", text)),
            "errors": [line for line in text.splitlines()
                       if any(e in line for e in FIXTURE_ERRORS)]}


def test_every_gpu_test_resolves_its_fixtures():
    plan = setup_plan("test")
    assert plan["rc"] == 0 and not plan["errors"], plan["output"][-4000:]
    # every gpu test of the suite was planned (none silently deselected or skipped); the phase
    # joins' tests are the ones check.sh's phases_gpu step runs
    assert plan["planned"] >= 9, plan["output"][-4000:]
    assert "test_phases_gpu.py::test_join_probe_keeps_device_events_or_says_why" in plan["output"]


def test_the_plan_catches_a_scope_mismatch(tmp_path):
    """The same check over a module whose module-scoped fixture asks for a function-scoped one
    (the error test_phases_gpu.py had) fails and names it."""
    (tmp_path / "test_broken_gpu.py").write_text(
        "import pytest\n\npytestmark = pytest.mark.gpu\n\n\n"
        "@pytest.fixture\ndef kernel():\n    return 1\n\n\n"
        "@pytest.fixture(scope='module')\ndef menu(kernel):\n    return kernel\n\n\n"
        "def test_uses_menu(menu):\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: needs CUDA\n")
    plan = setup_plan(str(tmp_path), cwd=tmp_path)
    assert plan["rc"] != 0
    assert any("ScopeMismatch" in e for e in plan["errors"]), plan["output"][-3000:]
