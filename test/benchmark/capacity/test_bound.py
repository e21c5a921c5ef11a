"""The physical bound: it bounds what the simulated systems reach, and moves the right way."""

from __future__ import annotations

import glob
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from benchmark.capacity.bound import best_mixture, physical_bound, prefix_hits
from benchmark.capacity.search import Cluster, Setting
from sglang_duet.sim import SimConfig

RESULTS = Path(__file__).resolve().parents[3] / "benchmark" / "results" / "capacity"


def test_bound_moves_with_gpus_slo_and_model():
    base = SimConfig(trace="azure-code")
    b = physical_bound(base)
    assert 0 < b["capacity_qps"] and 0.5 < b["prefill_share"] < 1.0  # 2K prompts, 28 outputs
    assert b["serial_qps"] <= b["capacity_qps"] <= b["compute_floor_qps"]
    four = physical_bound(replace(base, gpus=4))["capacity_qps"]
    assert four == pytest.approx(2 * b["capacity_qps"], rel=1e-4)
    tight = physical_bound(replace(base, tbt_slo_ms=20.0))
    assert tight["decode_batch"] <= b["decode_batch"]
    assert tight["capacity_qps"] <= b["capacity_qps"]
    assert physical_bound(replace(base, model="qwen3-14b"))["capacity_qps"] < b["capacity_qps"]
    assert sum(b["mixture"].values()) == pytest.approx(1.0)


def test_long_contexts_are_decode_and_kv_bound():
    b = physical_bound(SimConfig(trace="mooncake"))
    assert b["decode_batch"] == b["kv_batch_limit"]  # the KV pool, not tau, caps the batch
    assert b["decode_context"] > 10_000
    assert 0.0 < b["prefix_hit_share"] < 0.5  # hash_ids: some prompts share cached blocks


@pytest.mark.parametrize("trace", ["azure-conv", "mooncake"])
def test_concurrent_partitions_raise_the_bound_above_the_serial_one(trace):
    """Decode on a few SMs beside prefill overlaps HBM traffic with compute: pdmux reached 110%
    of the serial bound on azure-conv (Qwen3-8B), so the bound must count it."""
    b = physical_bound(SimConfig(trace=trace))
    assert b["capacity_qps"] > 1.1 * b["serial_qps"]
    assert any(k.startswith("split") for k in b["mixture"])


def test_no_committed_capacity_passes_the_bound():
    """Every policy's best-tuned capacity in the committed sweeps is below its case's bound."""
    paths = [p for p in glob.glob(str(RESULTS / "*-tp[0-9]*.json"))]
    assert paths
    for path in paths:
        body = json.loads(Path(path).read_text())
        cfg = Cluster(**body["config"]["cluster"]).sim_config(Setting("duet"), 1.0, 1000)
        bound = physical_bound(cfg)["capacity_qps"]
        for pol, r in body["policies"].items():
            assert float(r["best"]["capacity_qps"]) < bound, (path, pol)


def test_best_mixture():
    assert best_mixture([(1.0, 0.0), (0.0, 1.0)])[0] == pytest.approx(0.5)
    val, mix = best_mixture([(1.0, 0.0), (0.0, 1.0), (0.6, 0.6)])
    assert val == pytest.approx(0.6) and mix == {2: 1.0}
    # (3, 1) and (1, 2): a = d at share 1/3 of the first -> 5/3
    val, mix = best_mixture([(3.0, 1.0), (1.0, 2.0)])
    assert val == pytest.approx(5 / 3) and mix[0] == pytest.approx(1 / 3)
    # brute force over a grid of shares agrees
    rng = np.random.default_rng(0)
    pts = rng.uniform(0, 1, size=(6, 2))
    f = rng.dirichlet(np.ones(6), size=20000)
    brute = np.minimum(f @ pts[:, 0], f @ pts[:, 1]).max()
    assert brute <= best_mixture(pts.tolist())[0] + 1e-12


def test_prefix_hits():
    prompts = np.array([1024, 1024, 700, 1024])
    hashes = [[1, 2], [1, 2], [1, 9], [3]]
    assert prefix_hits(prompts, hashes, 1 << 20).tolist() == [0, 1023, 512, 0]
    assert prefix_hits(prompts, None, 1 << 20).tolist() == [0, 0, 0, 0]
    assert prefix_hits(prompts, hashes, 0).tolist() == [0, 0, 0, 0]  # no room: nothing cached

