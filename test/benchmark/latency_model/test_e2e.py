"""The end-to-end fidelity report: its reference set, metrics, front-end fit and pipeline."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from benchmark.latency_model import e2e_fit, e2e_report
from benchmark.latency_model.e2e_cases import (
    _lengths,
    case_config,
    case_workload,
    read_cases,
    sim_metrics,
)
from benchmark.latency_model.e2e_report import CSV
from sglang_duet.sim import SimConfig, Workload, simulate


def test_committed_reference_set():
    cases = read_cases(CSV)
    assert len(cases) >= 15
    sources = {c.source.split(" ")[0].split(",")[0] for c in cases}
    assert len(sources) >= 3  # gpustack, sgl-project, the DuetServe paper
    hopper = [c for c in cases if c.gpu in ("h100-sxm", "h200")]
    assert len(hopper) > len(cases) / 2
    assert all(c.published and c.engine for c in cases)
    for c in cases:  # every row builds a workload and a valid config
        cfg = case_config(c)
        assert cfg.validate() is cfg
        if c.workload not in ("mooncake", "azure-code"):
            assert len(case_workload(c)) == c.num_prompts


def test_bad_rows_are_named(tmp_path):
    text = CSV.read_text().splitlines()
    bad = text[1].split(",", 2)
    path = tmp_path / "r.csv"
    path.write_text("\n".join([text[0], f"{bad[0]},,{bad[2]}"]) + "\n")
    with pytest.raises(ValueError, match="no source"):
        read_cases(path)


def test_lengths_keep_the_published_total():
    x = _lengths(217.393, 1000)
    assert x.sum() == 217393 and set(x.tolist()) == {217, 218}


def test_client_metrics_of_a_run():
    # one request alone: TTFT = its prefill, TPOT = its mean step, throughput = 1 / e2e
    w = Workload(np.array([0.0]), np.array([100]), np.array([4]), "t")
    res = simulate(SimConfig(policy="sglang-chunked", gpus=1, frontend=False), w)
    m = sim_metrics(res)
    r = res.requests[0]
    assert m["ttft_mean_ms"] == pytest.approx(r.first_token_s * 1e3)
    assert m["tpot_mean_ms"] == pytest.approx((r.finish_s - r.first_token_s) / 3 * 1e3)
    assert m["itl_mean_ms"] == pytest.approx(m["tpot_mean_ms"])
    assert m["throughput_rps"] == pytest.approx(1.0 / r.finish_s)


def _fake_runs(values: dict[tuple[str, int, int], float], cases) -> e2e_fit.GridRuns:
    runs = e2e_fit.GridRuns.__new__(e2e_fit.GridRuns)
    runs.cases, runs.serial_grid = cases, (0.0, 0.01)
    runs.post_grid = ((0.0, 0.0), (0.0, 0.02))  # (per-token, latency)
    runs.metrics = {k: {"throughput_rps": v} for k, v in values.items()}
    return runs


def test_fit_and_kfold_hold_the_row_out():
    cases = [SimpleNamespace(id=i, flavor="vllm", published={"throughput_rps": 1.0},
                             not_comparable=()) for i in "abcd"]
    # grid (1, 0) is exact for a, b, c; d is only matched by (0, 1)
    vals = {}
    for c in cases:
        for i in range(2):
            for j in range(2):
                vals[c.id, i, j] = 2.0
        vals[c.id, 1, 0] = 1.0 if c.id != "d" else 3.0
        vals[c.id, 0, 1] = 1.0 if c.id == "d" else 1.5
    runs = _fake_runs(vals, cases)
    assert e2e_fit.fit_pair(runs, cases[:3]) == (1, 0)
    held, full = e2e_fit.kfold(runs, 4)
    assert held["d"]["throughput_rps"] == 3.0  # predicted by the fit on a, b, c
    assert full == {"vllm": (0.0, 0.0, 0.02)}  # on all four rows (0, 1) has the least loss
    assert e2e_fit.log_loss(cases[0], {"throughput_rps": None}) == 25.0


def test_report_pipeline_on_a_tiny_subset(tmp_path):
    out, costs = tmp_path / "e2e", tmp_path / "fe.json"
    rc = e2e_report.main(["--quick", "--kfold", "2", "--cases", "gpq-vllm-128,sgr-a100-sglang-rps4",
                          "--out", str(out), "--costs-out", str(costs)])
    assert rc == 0
    res = json.loads((tmp_path / "e2e.json").read_text())
    assert res["n_cases"] == 2 and "stamp" in res
    assert set(json.loads(costs.read_text())["systems"]) == {"sglang", "vllm"}
    row = {r["id"]: r for r in res["rows"]}["gpq-vllm-128"]
    assert row["ratio_before"]["throughput_rps"] > 0 and row["ratio_after"]["throughput_rps"] > 0
    assert set(row["ratio_without"]) == {*e2e_report.COSTS, "calibration"}
    assert res["checks"]["after"]["obs3"]["points"]
    md = (tmp_path / "e2e.md").read_text()
    assert "## Summary" in md and "gpq-vllm-128" in md and "Obs. 3" in md
