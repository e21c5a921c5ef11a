"""The admission benchmark's pure parts: the slice and its scaling (deterministic per seed), the
SLO's scaling, the attainment arithmetic, bench_serving's per-request TTFTs, the systems'
flags. No server starts here and nothing is timed (the run itself is the benchmark)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmark.serving.traces import load_trace
from benchmark.sim_to_real import admission as adm
from sglang_duet.sim.arrivals import poisson_times


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    from sglang_duet.tiny_model import default_model_path

    return AutoTokenizer.from_pretrained(str(default_model_path()))


@pytest.fixture(scope="module")
def trace():
    return load_trace(adm.TRACE)


def test_slice_is_contiguous_and_seeded(trace):
    s0, a = adm.trace_slice(trace, 30, seed=0)
    assert (s0, a) == adm.trace_slice(trace, 30, seed=0)
    assert a == trace[s0:s0 + 30]
    s1, _ = adm.trace_slice(trace, 30, seed=1)
    assert s1 != s0
    assert adm.trace_slice(trace, len(trace), seed=5) == (0, list(trace))
    with pytest.raises(ValueError):
        adm.trace_slice(trace, len(trace) + 1, seed=0)


def test_requests_are_the_scaled_slice_at_the_poisson_times(tok, trace):
    cfg = adm.Config(requests=20, qps=3.0, scale=1 / 64, seed=2)
    rows, info = adm.build_requests(cfg, tok, 4096)
    again, _ = adm.build_requests(cfg, tok, 4096)
    assert rows == again
    start, reqs = adm.trace_slice(trace, 20, seed=2)
    block = info["mooncake_block_tokens"]
    assert info["start"] == start and block == 8
    for r, t, h in zip(rows, reqs, info["hash_ids"], strict=True):
        want = max(1, round(t.input_len / 64))
        assert r.prompt_len == min(want, len(t.hash_ids) * block, 4096 - r.output_len)
        assert r.output_len == max(2, round(t.output_len / 64))
        # the simulator's prefix cache sees only the blocks wholly inside the scaled prompt
        assert h == list(t.hash_ids[: r.prompt_len // block])
    stamps = np.array([r.timestamp_ms for r in rows])
    assert np.allclose(stamps, 1000.0 * poisson_times(20, 3.0, 2))
    other, _ = adm.build_requests(adm.Config(requests=20, qps=3.0, seed=3), tok, 4096)
    assert [r.prompt_len for r in other] != [r.prompt_len for r in rows]


def test_attainment_counts_failures_as_misses_and_the_longest_tenth():
    ttft = [100.0, None, 300.0, 50.0, 200.0]
    lens = [10, 40, 20, 5, 40]
    got = adm.attainment(ttft, lens, slo_ms=200.0)
    assert got["requests"] == 5 and got["finished"] == 4
    assert got["within_slo"] == 3 and got["attainment"] == 0.6  # 100, 50, 200 (at the SLO)
    assert got["ttft_max_ms"] == 300.0
    assert got["ttft_p50_ms"] == 150.0
    assert got["ttft_p99_ms"] == round(float(np.percentile([100, 300, 50, 200], 99)), 1)
    # ceil(5 / 10) = 1 request: of the two 40-token prompts the earlier, which failed
    assert got["longest_tenth_attainment"] == 0.0
    eleven = adm.attainment([1.0] * 10 + [9.0], list(range(11)), slo_ms=5.0)
    assert eleven["attainment"] == round(10 / 11, 4)
    # two of eleven are the longest tenth: prompts 10 (late) and 9 (on time)
    assert eleven["longest_tenth_attainment"] == 0.5


def test_attainment_needs_one_ttft_per_prompt():
    with pytest.raises(ValueError):
        adm.attainment([1.0], [1, 2], 10.0)
    with pytest.raises(ValueError):
        adm.attainment([], [], 10.0)
    none = adm.attainment([None, None], [1, 2], 10.0)
    assert none["attainment"] == 0.0 and none["ttft_max_ms"] is None


def test_bench_ttfts_in_request_order(tmp_path):
    path = tmp_path / "bench.jsonl"
    path.write_text(json.dumps({"ttfts": [0.5]}) + "\n" + json.dumps(
        {"ttfts": [0.25, 0.0, 1.5], "errors": ["", "boom", ""]}) + "\n")
    assert adm.bench_ttfts(str(path), 4) == [250.0, None, 1500.0, None]


def test_slo_is_the_gpu_multiple_of_one_mean_prefill():
    m, hw, cal = adm.profile_paths(adm.SIM_TO_REAL, "cpu_calibration.json")
    a = adm.scaled_slo_ms(190.0, 12000.0, cal, hw, m)
    want = adm.GPU_SLO_MS * a["cpu_prefill_s"] / a["gpu_prefill_s"]  # both rounded to 0.1 ms
    assert a["ttft_slo_ms"] == pytest.approx(want, rel=0.01)
    longer = adm.scaled_slo_ms(380.0, 12000.0, cal, hw, m)
    assert longer["ttft_slo_ms"] > a["ttft_slo_ms"]


def test_systems_carry_their_order_and_the_slo():
    sys = adm.compared(5000.0)
    assert set(sys) == {"sglang-fcfs", "sglang-lpm", "duet-deadline"}
    for name, order in (("sglang-fcfs", "fcfs"), ("sglang-lpm", "lpm")):
        flags = sys[name].real.flags
        assert sys[name].real.stock and flags[flags.index("--schedule-policy") + 1] == order
        assert sys[name].sim == {"schedule_policy": order}
    duet = sys["duet-deadline"].real
    assert not duet.stock
    assert duet.flags[duet.flags.index("--duet-admission") + 1] == "deadline"
    assert duet.flags[duet.flags.index("--duet-ttft-slo-ms") + 1] == "5000"


def test_simulated_attainment_of_a_small_slice(tok):
    cfg = adm.Config(requests=12, qps=1.0, seed=0)
    rows, info = adm.build_requests(cfg, tok, 4096)
    got = adm.simulate(adm.compared(20000.0)["sglang-fcfs"], cfg, rows, info, 20000.0)
    assert got["requests"] == got["finished"] == 12
    assert 0.0 <= got["attainment"] <= 1.0
    assert got["ttft_max_ms"] >= got["ttft_p99_ms"] >= got["ttft_p50_ms"] > 0
