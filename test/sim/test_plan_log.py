"""`sim --plan-log`: one line per executed iteration, in the runtime's format, that plan_view
reads; one policy only."""

from __future__ import annotations

import json

import pytest

from sglang_duet import plan_view
from sglang_duet.sim.cli import main, run_config
from sglang_duet.sim.config import SimConfig


def test_one_line_per_iteration_in_the_runtime_format(tmp_path):
    cfg = SimConfig(trace="azure-code", policy="duet", qps=4.0, num_requests=40)
    report = run_config(cfg, plan_log=str(tmp_path / "plan"))
    files = sorted(tmp_path.iterdir())
    assert [f.name for f in files] == ["plan.dp0", "plan.dp1"]  # 2 GPUs, TP 1: two replicas
    lines = [json.loads(x) for f in files for x in f.read_text().splitlines()]
    assert {"mode", "decode_rids", "prefill", "sms_decode", "lookahead", "predicted_total_s",
            "measured_s", "decode_steps", "end_s", "waiting"} <= set(lines[0])
    first = json.loads(files[0].read_text().splitlines()[0])
    assert first["prefill"] and first["waiting"] >= 1  # the run starts with a prompt
    assert sum(c["length"] for line in lines for c in line["prefill"]) > 0
    ends = [json.loads(x)["end_s"] for x in files[0].read_text().splitlines()]
    assert ends == sorted(ends)
    assert report["results"]["duet"]["completed"] == 40
    assert len(plan_view.read(files[0])) == len(files[0].read_text().splitlines())


def test_the_log_leaves_the_run_unchanged(tmp_path):
    cfg = SimConfig(trace="azure-code", policy="duet", qps=4.0, num_requests=40)
    with_log = run_config(cfg, plan_log=str(tmp_path / "plan"))["results"]["duet"]
    without = run_config(cfg)["results"]["duet"]
    with_log.pop("sim_wall_s"), without.pop("sim_wall_s")  # the machine's time, not the run's
    assert with_log == without


def test_plan_log_needs_one_policy_and_a_directory(tmp_path, capsys):
    cfg = SimConfig(trace="azure-code", policy="all", qps=4.0, num_requests=20)
    with pytest.raises(ValueError, match="one --policy"):
        run_config(cfg, plan_log=str(tmp_path / "plan"))
    assert main(["--trace", "azure-code", "--policy", "duet", "--num-requests", "20",
                 "--quiet", "--plan-log", str(tmp_path / "no" / "plan")]) == 2
    assert "directory does not exist" in capsys.readouterr().err
