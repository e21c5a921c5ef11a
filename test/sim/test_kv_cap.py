"""--max-total-tokens caps the simulated KV pool as it caps SGLang's; a model given as a
config.json path (ModelSpec.from_hf_config) runs."""

from __future__ import annotations

import json

import pytest

from sglang_duet.sim import SimConfig
from sglang_duet.sim.kvcache import size_kv_cache


def test_cap_only_lowers_the_pool():
    free = size_kv_cache(80 * 10**9, 16 * 10**9, 147456)
    capped = size_kv_cache(80 * 10**9, 16 * 10**9, 147456, max_tokens=4096)
    assert capped.capacity_tokens == 4096 < free.capacity_tokens
    big = size_kv_cache(80 * 10**9, 16 * 10**9, 147456, max_tokens=10**9)
    assert big.num_pages == free.num_pages
    with pytest.raises(ValueError, match="max-total-tokens"):
        SimConfig(max_total_tokens=0).validate()


def test_model_from_a_config_path(tmp_path):
    from sglang_duet.sim.arrivals import fixed_workload
    from sglang_duet.sim.engine import Simulation
    from sglang_duet.tiny_model import SIZES

    (tmp_path / "config.json").write_text(json.dumps(dict(SIZES["cpu-bench"],
                                                          model_type="qwen3")))
    sim = Simulation(SimConfig(model=str(tmp_path), gpus=1, max_total_tokens=2048,
                               policy="sglang-chunked"), fixed_workload(100, 8, 4.0, 6))
    assert sim.model.num_layers == 4 and sim.sizing.capacity_tokens == 2048
    res = sim.run()
    assert all(r.finish_s > 0 for r in res.requests)
