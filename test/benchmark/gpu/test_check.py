"""check.sh on a machine without CUDA: the dry run reaches every step of the plan, records each
as skipped for no CUDA device with its cap, and its summary holds a time plan that fits."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmark.gpu.carry.spec import ROOT
from benchmark.gpu.plan import STEPS, time_plan


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(_cuda(), reason="a CUDA device is present: check.sh would run for real")
def test_dry_run_records_every_step_with_its_cap(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("CPU_DRY_RUN", "STAGE1_S",
                                                            "STAGE2_S")}
    env.update(PYTHON=sys.executable, DUET_GPU_CACHE=str(tmp_path / "cache"))
    out = tmp_path / "out"
    run = subprocess.run(["bash", str(ROOT / "benchmark/gpu/check.sh"), str(out), "all"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    stages = {"setup": "stage_setup.json", "1": "stage1.json", "2": "stage2.json"}
    bodies = {k: json.loads((out / f).read_text()) for k, f in stages.items()}
    for s in STEPS:
        entry = bodies[s.stage]["steps"][s.name]
        assert entry["verdict"] == "skipped" and entry["skip_reason"] == "no CUDA device"
        assert entry["cap_s"] == s.cap_s and entry["required"] == s.required
    for body in bodies.values():
        assert body["ok"] is None and not body["complete"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dry_run"] and summary["ok"] is None
    assert summary["plan"] == time_plan() and summary["plan"]["fits"]
    log = (out / "check.log").read_text()
    assert "triton backend only" in log and "TP=2 cannot run on one GPU" in log
    assert "dry run (nothing ran)" in log and "fits=True" in log
    assert len(list(out.iterdir())) <= 8  # the device tool returns at most 8 files
