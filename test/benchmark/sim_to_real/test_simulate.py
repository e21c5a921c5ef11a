"""The simulator's side of the CPU check: the overlap emission rule, and the compared systems
as simulator policies on the CPU profile (no server)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmark.sim_to_real.profile import CPU, write_hardware
from benchmark.sim_to_real.simulate import overlap_emission, simulate_point, summarize
from sglang_duet.sim.arrivals import Workload, poisson_times
from sglang_duet.tiny_model import SIZES


@pytest.fixture
def profile(tmp_path):
    cfg = dict(SIZES["cpu-bench"], model_type="qwen3", torch_dtype="float32")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return str(tmp_path / "config.json"), write_hardware(tmp_path / "cpu.json")


def workload(n=24, qps=2.0):
    rng = np.random.default_rng(3)
    return Workload(poisson_times(n, qps), rng.integers(20, 300, n), rng.integers(2, 40, n), "t")


def test_overlap_rule_delays_a_token_to_the_end_of_the_next_iteration():
    # iterations end at 1, 2 (a stretch's inner step), 3 (stretch end), then 5 after idling
    steps = np.array([2.0, 3.0, 5.0])
    out = overlap_emission(np.array([1.0, 2.0, 3.0, 5.0]), steps, starts=[0.0, 1.0, 4.0],
                           ends=[1.0, 3.0, 5.0])
    # 1 -> 2 (an iteration started at 1), 2 -> 3 (inside the stretch), 3 stays (idle after),
    # 5 stays (last)
    assert out.tolist() == [2.0, 3.0, 3.0, 5.0]


def test_plain_chunked_is_duet_aggregated_and_the_rule_only_delays(profile):
    model, hw = profile
    wl = workload()
    args = (wl, model, hw, "default", 128, 16384)
    duet = simulate_point("duet-aggregated", *args)
    plain = simulate_point("sglang-chunked", *args, overlap_rule=False)
    shifted = simulate_point("sglang-chunked", *args)
    for key in ("ttft_p50_ms", "ttft_p99_ms", "tbt_p50_ms", "tbt_p99_ms", "throughput_rps"):
        assert duet[key] == pytest.approx(plain[key])  # one batching rule (policy.batching)
    assert shifted["ttft_p50_ms"] > plain["ttft_p50_ms"]
    assert shifted["duration_s"] >= plain["duration_s"] and shifted["completed"] == len(wl)


def test_default_runs_prefill_only_iterations(profile):
    model, hw = profile
    out = simulate_point("sglang-default", workload(), model, hw, "default", 4096, 16384)
    sched = out["schedule"]
    assert sched["prefill_only_iterations"] > 0 and sched["mixed_iterations"] == 0
    assert sched["decode_only_iterations"] > 0 and out["busy_s"]["mixed"] == 0.0
    chunked = simulate_point("sglang-chunked", workload(), model, hw, "default", 128, 16384)
    assert chunked["schedule"]["mixed_iterations"] > 0
    busy = sum(chunked["busy_s"].values())
    assert 0 < busy <= chunked["duration_s"] + 1e-9  # iterations fit in the run


def test_the_kv_cap_is_sglangs_pool(profile):
    from sglang_duet.sim import SimConfig
    from sglang_duet.sim.engine import Simulation

    model, hw = profile
    sim = Simulation(SimConfig(model=model, hardware=hw, calibration="default", gpus=1,
                               max_total_tokens=16384, policy="sglang-chunked"), workload())
    assert sim.sizing.capacity_tokens == 16384 and sim.model.dtype_bytes == 4
    assert sim.latency.hardware == CPU


def test_summary_percentiles_and_rates():
    s = summarize(np.array([0.1, 0.2, 0.3]), np.array([0.01] * 9 + [0.1]), 3, 2.0, 30)
    assert s["ttft_p50_ms"] == 200.0 and s["tbt_p50_ms"] == 10.0
    assert s["throughput_rps"] == 1.5 and s["output_tps"] == 15.0
    assert summarize(np.zeros(0), np.zeros(0), 0, 0.0, 0)["ttft_p50_ms"] is None
