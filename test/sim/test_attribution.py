"""Gap attribution: each scenario provokes one known cause, and every gap over tau is charged."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import make_workload, mem_fraction_for, run

from sglang_duet.sim import policy_names
from sglang_duet.sim.attribution import CAUSES

# one short request decoding a long output, then 8k-token prompts landing while it decodes
LONG_PREFILLS = make_workload([0.0, 0.3, 0.6, 0.9], [64, 8000, 8000, 8000], [300, 4, 4, 4])


def _causes(m):
    assert sum(m["gap_causes"].values()) == m["gaps_over_tau"]
    return {c: n for c, n in m["gap_causes"].items() if n}


def test_mixed_batch_over_tau_is_aggregated():
    _, m = run(LONG_PREFILLS, "sglang-chunked", gpus=1)
    assert set(_causes(m)) == {"aggregated_over_tau"}


def test_prefill_first_pauses_decode():
    _, m = run(LONG_PREFILLS, "sglang-default", gpus=1)
    assert "prefill_paused_decode" in _causes(m)
    assert "aggregated_over_tau" not in _causes(m)


@pytest.mark.parametrize("k", [1, 4])
def test_synchronous_spatial_waits_behind_prefill_and_the_gap_scheme_does_not(k):
    # the paper's scheme: k look-ahead steps, then the decodes wait for the longer prefill
    _, m = run(LONG_PREFILLS, "duet-paper", gpus=1, duet_mode="spatial", tbt_slo_ms=30.0,
               max_lookahead=k)
    assert _causes(m).get("waiting_behind_spatial_prefill", 0) > 0
    _, m = run(LONG_PREFILLS, "duet", gpus=1, duet_mode="spatial", tbt_slo_ms=30.0,
               max_lookahead=k)
    assert m["mode_share"].get("spatial", 0) > 0
    assert _causes(m).get("waiting_behind_spatial_prefill", 0) == 0


def test_retraction_is_preemption():
    rng = np.random.default_rng(2)
    arr = np.cumsum(rng.exponential(1 / 20, 60))
    w = make_workload(arr, rng.integers(1, 3000, 60), rng.integers(1, 300, 60))
    _, m = run(w, "sglang-chunked", mem_fraction=mem_fraction_for(6000),
               activation_reserve_gb=0.0, tbt_slo_ms=1.0)
    assert m["preemptions"] > 0 and _causes(m).get("preemption", 0) > 0


def test_1p1d_first_gap_waits_to_join():
    # a long decode batch on the decode worker; a new request's KV lands mid-iteration
    w = make_workload([0.0] + [0.05 * i for i in range(1, 40)], [64] * 40, [400] * 40)
    _, m = run(w, "dynamo", tbt_slo_ms=1000.0)
    step_ms = m["tbt_max_ms"] / 2  # the longest gap: waiting out a step, then its own step
    _, m = run(w, "dynamo", tbt_slo_ms=step_ms * 1.3)  # over one step, under two
    assert set(_causes(m)) == {"kv_admission"}


@pytest.mark.parametrize("policy", policy_names())
def test_every_gap_over_tau_has_one_cause(policy):
    rng = np.random.default_rng(5)
    w = make_workload(np.cumsum(rng.exponential(1 / 30, 80)), rng.integers(1, 9000, 80),
                      rng.integers(1, 200, 80))
    _, m = run(w, policy, tbt_slo_ms=40.0)
    assert set(m["gap_causes"]) == set(CAUSES)
    assert sum(m["gap_causes"].values()) == m["gaps_over_tau"]
    if policy in ("duet", "sglang-pdmux", "dynamo"):  # these keep every gap within tau
        assert m["gaps_over_tau"] == 0
    else:
        assert m["gaps_over_tau"] > 0
