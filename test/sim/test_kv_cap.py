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


def test_page_size_is_sglangs_token_granularity(tmp_path):
    """SGLang allocates KV per token by default (page 1, `_page_size_default`); 16-token pages
    waste up to 15 tokens per request, which a tight pool feels."""
    from sglang_duet.sim.arrivals import fixed_workload
    from sglang_duet.sim.engine import Simulation

    wl = fixed_workload(97, 40, 50.0, 30)  # a burst: the pool, not the budget, limits admission
    peak, ttft = {}, {}
    for page in (None, 1):
        sim = Simulation(SimConfig(gpus=1, max_total_tokens=2048, page_size=page, frontend=False,
                                   policy="sglang-chunked"), wl)
        assert sim.sizing.capacity_tokens == 2048
        assert sim.replicas[0].kv.page_size == (page or 16)
        res = sim.run()
        rep = res.replicas[0]
        peak[page] = rep.kv.peak_used * rep.kv.page_size
        ttft[page] = sorted(r.first_token_s - r.arrival_s for r in res.requests)[15]
        assert all(r.finish_s > 0 for r in res.requests)
    assert peak[1] <= 2048 and peak[None] <= 2048
    # 97 + 40 tokens = 137 per request: 9 pages (144 tokens) at 16, so fewer fit at once
    assert ttft[1] < 0.75 * ttft[None]
    with pytest.raises(ValueError, match="page-size"):
        SimConfig(page_size=0).validate()


def test_kv_pool_scale_is_a_what_if_of_the_pool_alone():
    """--kv-pool-scale multiplies the pool as sized (the kv-pool study's question: does the
    pool bind?), leaves the model and memory sizing as they are, and a burst that the pool holds
    back at scale 1 is admitted sooner with twice the pool."""
    from sglang_duet.sim.arrivals import fixed_workload
    from sglang_duet.sim.engine import Simulation

    wl = fixed_workload(97, 40, 50.0, 30)
    ttft = {}
    for scale in (1.0, 2.0):
        sim = Simulation(SimConfig(gpus=1, max_total_tokens=2048, kv_pool_scale=scale,
                                   frontend=False, policy="sglang-chunked"), wl)
        assert sim.sizing.capacity_tokens == int(2048 // 16 * scale) * 16
        assert all(rep.kv.num_pages == sim.sizing.num_pages for rep in sim.replicas)
        base = Simulation(SimConfig(gpus=1, max_total_tokens=2048, frontend=False,
                                    policy="sglang-chunked"), wl).sizing
        assert {k: v for k, v in sim.sizing.to_dict().items()
                if k not in ("num_pages", "capacity_tokens")} == {
            k: v for k, v in base.to_dict().items() if k not in ("num_pages", "capacity_tokens")}
        res = sim.run()
        assert all(r.finish_s > 0 for r in res.requests)
        ttft[scale] = sorted(r.first_token_s - r.arrival_s for r in res.requests)[20]
    assert ttft[2.0] < ttft[1.0]
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="kv-pool-scale"):
            SimConfig(kv_pool_scale=bad).validate()
