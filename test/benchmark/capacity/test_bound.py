"""The physical bound: it bounds what the simulated systems reach, and moves the right way."""

from __future__ import annotations

from dataclasses import replace

from benchmark.capacity.bound import physical_bound
from sglang_duet.sim import SimConfig


def test_bound_moves_with_gpus_slo_and_model():
    base = SimConfig(trace="azure-code")
    b = physical_bound(base)
    assert 0 < b["capacity_qps"] and 0.5 < b["prefill_share"] < 1.0  # 2K prompts, 28 outputs
    assert b["compute_floor_qps"] > b["capacity_qps"]
    assert physical_bound(replace(base, gpus=4))["capacity_qps"] == 2 * b["capacity_qps"]
    tight = physical_bound(replace(base, tbt_slo_ms=20.0))
    assert tight["decode_batch"] <= b["decode_batch"]
    assert tight["capacity_qps"] <= b["capacity_qps"]
    assert physical_bound(replace(base, model="qwen3-14b"))["capacity_qps"] < b["capacity_qps"]


def test_long_contexts_are_decode_and_kv_bound():
    b = physical_bound(SimConfig(trace="mooncake"))
    assert b["decode_batch"] == b["kv_batch_limit"]  # the KV pool, not tau, caps the batch
    assert b["decode_context"] > 10_000
