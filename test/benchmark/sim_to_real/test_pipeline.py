"""The whole sim-to-real pipeline once, small: one sglang-duet aggregated server on the embedded
tiny model, one load point of 6 requests through bench_serving, the CPU profile fitted to its
plan log, the simulator on the same requests, the report. Checks the plumbing, not the
accuracy (the tiny model's iterations are host time; the benchmark uses cpu-bench)."""

from __future__ import annotations

import json

import pytest

from benchmark.sim_to_real.pipeline import Config, run
from benchmark.sim_to_real.simulate import METRICS


@pytest.mark.server
def test_one_point_end_to_end(tmp_path):
    from sglang_duet.tiny_model import default_model_path

    cfg = Config(qps=[4.0], min_requests=6, max_requests=6, systems=["duet-aggregated"],
                 model=str(default_model_path()), chunk=64, tag="smoke",
                 out_dir=str(tmp_path / "out"), quiet_wait_s=0.0, host_probe=False, nice=0)
    lines: list[str] = []
    res = run(cfg, progress=lines.append, work=str(tmp_path / "work"))
    duet = res["systems"]["duet-aggregated"]
    assert duet["status"] == "ran", duet.get("reason")
    (real,) = duet["runs"]
    assert real["metrics"]["completed"] == 6 and real["metrics"]["failed"] == 0
    assert len(real["metrics"]["ttft_ms"]) == 6 and real["cpu"]["wall_s"] > 0
    assert duet["settings"]["chunked_prefill_size"] == 64
    prof = res["profile"]
    assert prof["samples"] > 5 and prof["heldout_mape"] is not None
    for key in ("hardware", "model", "calibration"):
        assert (tmp_path / "out").joinpath(prof[key].rsplit("/", 1)[-1]).exists(), key
    sim = duet["sim"]["4"]
    assert sim["completed"] == 6 and duet["sim_budget"] == 64
    rows = duet["comparison"]
    assert [r["metric"] for r in rows] == list(METRICS)
    assert all(r["ratio"] is not None and r["ratio"] > 0 for r in rows)
    saved = json.loads((tmp_path / "out" / "smoke.json").read_text())
    assert saved["stamp"]["commit"] and saved["verdict"]["all"]["targeted"] >= 4
    assert "| 4 | ttft_p50_ms |" in (tmp_path / "out" / "smoke.md").read_text()
    assert any("targets met" in x for x in lines)
