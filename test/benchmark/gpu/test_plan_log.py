"""Predicted vs measured iteration times from a --duet-plan-log."""

from __future__ import annotations

import json

import pytest

from benchmark.gpu.plan_log import WARMUP, summarize_plan_log


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_errors_per_mode_without_warmup(tmp_path):
    warm = [{"mode": "aggregated", "predicted_total_s": 1.0, "measured_s": 100.0}] * WARMUP
    rows = warm + [
        {"mode": "idle", "predicted_total_s": 0.0, "measured_s": 0.0},
        {"mode": "aggregated", "predicted_total_s": 0.010, "measured_s": 0.008},
        {"mode": "aggregated", "predicted_total_s": 0.012, "measured_s": 0.012},
        {"mode": "aggregated", "predicted_total_s": 0.006, "measured_s": 0.008},
        {"mode": "spatial", "predicted_total_s": 0.020, "measured_s": 0.010},
    ]
    out = summarize_plan_log([_write(tmp_path / "p.jsonl.tp0.dp0", rows)])
    assert out["warmup_iterations_left_out"] == WARMUP
    assert out["iterations_by_mode"] == {"aggregated": 3, "spatial": 1}
    agg = out["by_mode"]["aggregated"]
    assert agg["iterations"] == 3 and agg["meas_ms_median"] == pytest.approx(8.0)
    assert agg["rel_err_median"] == pytest.approx(0.0)
    assert agg["abs_rel_err_median"] == pytest.approx(0.25)
    assert out["by_mode"]["spatial"]["rel_err_median"] == pytest.approx(1.0)
    assert out["ok"]


def test_a_log_without_measured_times_is_not_ok(tmp_path):
    rows = [{"mode": "aggregated", "predicted_total_s": 0.01}] * (WARMUP + 3)
    out = summarize_plan_log([_write(tmp_path / "p.jsonl", rows)])
    assert out["by_mode"] == {} and out["ok"] is False
