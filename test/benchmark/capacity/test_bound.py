"""The physical bound: it bounds what the simulated systems reach, and moves the right way."""

from __future__ import annotations

import glob
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linprog

from benchmark.capacity.bound import best_mixture, physical_bound, prefix_hits
from benchmark.capacity.queue_bound import (
    checked_queue_bound,
    fcfs_first_tokens,
    prefill_rate,
    queue_bound,
    window_passes,
)
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


# --- the queue-aware bound (queue_bound.py) --------------------------------------------------


def test_prefill_rate_is_the_lp_optimum():
    pts = [(10.0, 0.0), (0.0, 5.0), (6.0, 3.0)]
    assert prefill_rate(pts, 0.0) == 10.0
    assert prefill_rate(pts, 3.0) == pytest.approx(6.0)  # (6, 3) alone beats mixing the ends
    assert prefill_rate(pts, 4.0) == pytest.approx(3.0)  # half (6, 3), half (0, 5)
    assert prefill_rate(pts, 5.0) == pytest.approx(0.0)
    assert prefill_rate(pts, 6.0) == 0.0  # no mixture decodes that fast
    # the LP solved by scipy agrees: max a.f s.t. d.f >= need, sum f = 1, f >= 0
    rng = np.random.default_rng(1)
    for _ in range(20):
        p = rng.uniform(0, 1, size=(7, 2))
        for need in (0.2, 0.5, 0.8):
            lp = linprog(-p[:, 0], A_ub=[-p[:, 1]], b_ub=[-need], A_eq=[np.ones(7)], b_eq=[1.0])
            want = -lp.fun if lp.status == 0 else 0.0
            assert prefill_rate(p.tolist(), need) == pytest.approx(want, abs=1e-9)


def test_fcfs_first_tokens():
    arr = np.array([0.0, 0.0, 1.0, 5.0])
    svc = np.array([2.0, 1.0, 1.0, 1.0])
    assert fcfs_first_tokens(arr, svc, 1).tolist() == [2.0, 3.0, 4.0, 6.0]
    assert fcfs_first_tokens(arr, svc, 2).tolist() == [2.0, 1.0, 2.0, 6.0]


def test_window_passes():
    arr = np.arange(100, dtype=float)
    assert window_passes(arr, arr + 1.0, 10.0, 0.9)
    assert not window_passes(arr, arr + 11.0, 10.0, 0.9)  # every TTFT over the SLO
    assert not window_passes(arr, arr + 0.05 * arr, 10.0, 0.9)  # TTFT grows 4 s in the window
    late = arr + np.where(arr > 80, 100.0, 1.0)  # the window's last first tokens come too late
    assert not window_passes(arr, late, 1000.0, 0.9)


def test_queue_bound_orders_and_bounds_the_committed_capacities():
    """The FCFS ceiling (decode free, the whole device prefilling) passes every committed
    best-tuned capacity, the fluid figure lies below it, and on mooncake (prompts to 100K+)
    queueing alone costs the ideal scheduler over 15% of the throughput bound."""
    paths = sorted(glob.glob(str(RESULTS / "*-tp[0-9]*.json")))
    assert paths
    for path in paths:
        body = json.loads(Path(path).read_text())
        cfg = Cluster(**body["config"]["cluster"]).sim_config(Setting("duet"), 1.0, 1000)
        q = queue_bound(cfg, int(body["config"]["requests"]))
        assert 0 < q["queue_qps"] <= q["queue_ceiling_qps"]
        for pol, r in body["policies"].items():
            assert float(r["best"]["capacity_qps"]) < q["queue_ceiling_qps"], (path, pol)
        if "mooncake" in path:
            assert q["queue_qps"] < 0.85 * physical_bound(cfg)["capacity_qps"]


def test_checked_queue_bound_takes_the_longer_run_where_it_falls():
    """The run-length rule of the capacity runs: mooncake's 14B figure falls by more than 5%
    over twice the requests (a longer sample holds more of its rare long prompts), so the
    longer run's is the figure; a figure that holds keeps the shorter run's."""
    for model, tp, longer in (("qwen3-14b", 2, True), ("qwen3-8b", 1, False)):
        cfg = Cluster("mooncake", model, tp).sim_config(Setting("duet"), 1.0, 1000)
        short, long = queue_bound(cfg, 6000), queue_bound(cfg, 12000)
        got = checked_queue_bound(cfg, 6000)
        assert got["run_length"]["sets_figure"] is longer
        assert got["queue_qps"] == (long if longer else short)["queue_qps"]
        assert got["requests"] == (12000 if longer else 6000)
