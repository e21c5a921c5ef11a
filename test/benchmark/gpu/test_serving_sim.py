"""Stage 2's simulated prediction next to its measurement, without a server or a GPU: a
serving result as `benchmark.serving.compare` leaves it (runs, replay files, server log)."""

from __future__ import annotations

import json

import pytest

from benchmark.gpu.serving_sim import attach_predictions, compare_point
from benchmark.serving.convert import ReplayRequest, write_jsonl
from benchmark.sim_to_real.profile import write_hardware
from sglang_duet.sim.arrivals import poisson_times
from sglang_duet.tiny_model import SIZES

MEASURED = {"median_ttft_ms": 400.0, "p99_ttft_ms": 900.0, "p50_itl_ms": 30.0,
            "p99_itl_ms": 120.0, "request_throughput": 1.5}


@pytest.fixture
def serving(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(dict(SIZES["cpu-bench"], model_type="qwen3",
                                                       torch_dtype="float32")))
    replay = tmp_path / "serving_work"
    replay.mkdir()
    times = poisson_times(12, 2.0)
    write_jsonl(str(replay / "requests_qps2.jsonl"),
                [ReplayRequest("x", 50 + 10 * i, 8, 1e3 * t) for i, t in enumerate(times)])
    write_jsonl(str(replay / "requests_qps3.jsonl"), [ReplayRequest("x", 50, 8)])  # no stamps
    (replay / "server_sglang-chunked.log").write_text(
        "server_args=ServerArgs(chunked_prefill_size=64, max_total_tokens=16384)\n"
        "max_total_num_tokens=16384, chunked_prefill_size=64, max_prefill_tokens=16384\n")
    runs = [{"qps": 2.0, "summary": dict(MEASURED)}, {"qps": 3.0, "summary": dict(MEASURED)},
            {"qps": 4.0, "summary": None, "error": "bench failed"}]
    result = {"systems": {"sglang-chunked": {"status": "ran", "runs": runs},
                          "sglang-pdmux": {"status": "failed", "runs": []}}}
    return result, tmp_path, str(model), write_hardware(tmp_path / "cpu.json")


def test_predictions_sit_next_to_each_measured_point(serving):
    result, work, model, hw = serving
    table = attach_predictions(result, work, model, hw, "default")
    sim = result["systems"]["sglang-chunked"]["simulated"]
    assert sim["token_budget"] == 64 and sim["settings"]["max_total_num_tokens"] == 16384
    assert sim["hardware"] == hw and sim["calibration"] == "default"
    point = sim["points"]["2"]
    assert point["predicted"]["completed"] == 12
    vs = point["vs_measured"]
    for key, meas in (("ttft_p50_ms", 400.0), ("tbt_p99_ms", 120.0), ("throughput_rps", 1.5)):
        assert vs[key]["measured"] == meas
        assert vs[key]["ratio"] == round(point["predicted"][key] / meas, 3)
    assert table == {"sglang-chunked": {"2": {k: v["ratio"] for k, v in vs.items()}}}
    assert "no arrival timestamps" in sim["points"]["3"]["error"]  # plain Poisson: no prediction
    assert "4" not in sim["points"]  # the failed run has nothing to compare
    assert "simulated" not in result["systems"]["sglang-pdmux"]


def test_tolerances_and_saturation():
    pred = {"ttft_p50_ms": 500.0, "ttft_p99_ms": 900.0, "tbt_p50_ms": 30.0, "tbt_p99_ms": 200.0,
            "throughput_rps": 1.6}
    out = compare_point(MEASURED, pred, qps=2.0)  # 1.5 of 2 offered: saturated
    assert out["ttft_p50_ms"]["ok"] is True and out["tbt_p99_ms"]["ok"] is False
    assert out["throughput_rps"]["ok"] is True  # 1.067, within 15%
    assert compare_point(MEASURED, pred, qps=1.5)["throughput_rps"]["ok"] is None  # kept up


def test_the_dry_run_predicts_with_the_cpu_profile(tmp_path):
    from benchmark.gpu.serving_check import sim_profile
    from sglang_duet.latency import Calibration, get_hardware

    hw, cal = sim_profile(True, tmp_path)
    assert get_hardware(hw).name == "cpu-2x-zen2"
    assert cal == "default" or Calibration.load(cal).n_samples > 0
