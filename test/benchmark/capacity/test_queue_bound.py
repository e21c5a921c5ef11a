"""The queue-aware bound: the LP, the FCFS queue, the window rule, and what it bounds."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linprog

from benchmark.capacity.bound import physical_bound
from benchmark.capacity.queue_bound import (
    BEST_ORDERS,
    checked_queue_bound,
    fcfs_first_tokens,
    ordered_first_tokens,
    prefill_rate,
    queue_bound,
    sjf_first_tokens,
    window_passes,
)
from benchmark.capacity.search import Cluster, Setting
from sglang_duet.policy.admission import Admission, AdmissionConfig
from sglang_duet.sim import SimConfig, Simulation, build_arrivals, load_trace
from sglang_duet.sim.metrics import token_times
from sglang_duet.sim.steady import steady_state

RESULTS = Path(__file__).resolve().parents[3] / "benchmark" / "results" / "capacity"

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
    # TTFT grows 1.6 s across the window, every first token in time and admitted: rise only
    assert not window_passes(arr, 1.02 * arr + 1.0, 10.0, 0.9)
    assert window_passes(arr, 1.01 * arr + 1.0, 10.0, 0.9)  # 0.8 s: within 10% of the SLO
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


@pytest.mark.parametrize("qps", [2.0, 40.0])
def test_window_passes_is_the_steady_state_rule(qps):
    """On a simulated run with a TBT SLO no gap can miss, `window_passes` on the run's own
    client first-token times gives `steady_state`'s verdict; one load passes, one does not."""
    cfg = SimConfig(trace="azure-code", qps=qps, num_requests=300, tbt_slo_ms=1e9)
    work = build_arrivals(load_trace(cfg.trace), qps, 300, cfg.seed)
    res = Simulation(cfg, work, "sglang-chunked").run()
    ttft = cfg.ttft_slo_ms / 1e3
    st = steady_state(res, 1e6, ttft)
    times, owner, done = token_times(res)
    first = np.full(len(done), np.inf)
    np.minimum.at(first, owner, times)
    order = np.argsort([r.arrival_s for r in done], kind="stable")
    arrival = np.array([r.arrival_s for r in done])[order]
    got = window_passes(arrival, first[order], ttft, 0.9)
    assert got == (st["keeps_up"] and st["attainment"] >= 0.9)
    assert got == (qps == 2.0)


def test_the_ordered_server_lets_short_prompts_pass_a_long_one():
    """One server busy for 2 s: a 9 s prefill queues, three 0.5 s ones just after. First come,
    first served, they all wait for it; in the deadline order (TTFT SLO 5 s) they go first and
    only the long one is late; past the aging bound (3 x 5 s) nothing overtakes."""
    arr = np.array([0.0, 0.05, 0.1, 0.2, 0.3])
    svc = np.array([2.0, 9.0, 0.5, 0.5, 0.5])
    fcfs = fcfs_first_tokens(arr, svc, 1)
    adm = Admission(AdmissionConfig("deadline", 5.0), lambda q, c: 0.0)
    got = ordered_first_tokens(arr, svc, 1, adm)
    assert np.count_nonzero(fcfs - arr <= 5.0) == 1  # the short ones wait for the long one
    assert np.count_nonzero(got - arr <= 5.0) == 4
    assert got[1] == pytest.approx(12.5)
    # behind a 16 s prefill the long one has waited 15.95 s >= 15 s when the server frees: it
    # goes first although the short ones (arrived at 14 s) could still make their deadlines
    arr = np.array([0.0, 0.05, 14.0, 14.1, 14.2])
    svc = np.array([16.0, 9.0, 0.5, 0.5, 0.5])
    assert ordered_first_tokens(arr, svc, 1, adm)[1] == pytest.approx(25.0)
    patient = Admission(AdmissionConfig("deadline", 5.0, aging=4.0), lambda q, c: 0.0)
    assert ordered_first_tokens(arr, svc, 1, patient)[1] == pytest.approx(26.5)


def test_the_best_order_bound_is_at_least_fcfs_on_mooncake():
    cfg = Cluster("mooncake", "qwen3-8b", 1).sim_config(Setting("duet"), 1.0, 1000)
    q = queue_bound(cfg, 2000, orders=BEST_ORDERS)
    assert q["queue_best_qps"] >= q["queue_qps"]
    assert q["queue_best_order"] in ("fcfs", *BEST_ORDERS)
    assert q["queue_best_qps"] == max(q["queue_order_qps"].values())


@pytest.mark.parametrize("seed", range(6))
def test_the_sjf_heaps_equal_the_readable_order(seed):
    rng = np.random.default_rng(seed)
    n = 300
    arr = np.sort(rng.uniform(0, 60, n))
    svc = rng.choice([0.05, 0.3, 1.0, 4.0], n) * rng.uniform(0.5, 1.5, n)
    adm = Admission(AdmissionConfig("sjf", 2.0, aging=3.0), lambda q, c: 0.0)
    for servers in (1, 2):
        want = ordered_first_tokens(arr, svc, servers, adm)
        assert np.allclose(sjf_first_tokens(arr, svc, servers, adm.aged_s), want)
