"""The host-overhead term: a CPU-scheduled pass, duet's look-ahead steps, the spatial join."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sglang_duet.latency import Batch, Calibration

HOST = Calibration(iteration_overhead_s=1e-3, launch_layer_s=80e-6, graph_replay_s=20e-6,
                   join_s=30e-6, request_overhead_s=10e-6)
DEC, PRE = Batch.decode(16, 4096), Batch.prefill(2048)


def test_scheduled_pass_graph_replay_or_eager_launches(make_lm):
    lm = make_lm(calibration=HOST)
    L = lm.model.num_layers
    assert lm.predict(DEC).host_s == pytest.approx(1e-3 + 20e-6 + 16 * 10e-6)
    assert lm.predict(PRE).host_s == pytest.approx(1e-3 + L * 80e-6 + 10e-6)
    mixed = lm.predict_union(DEC, PRE)  # a mixed batch runs eager
    assert mixed.host_s == pytest.approx(1e-3 + L * 80e-6 + 17 * 10e-6)
    assert lm.predict([]).host_s == 0.0


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_lookahead_steps_cost_less_host_than_scheduled_steps(make_lm, k):
    lm = make_lm(calibration=HOST)
    look = lm.predict(DEC, 66, host="lookahead")
    sched = lm.predict(DEC, 66)
    assert k * look.host_s < k * sched.host_s
    assert k * sched.host_s - k * look.host_s == pytest.approx(k * 1e-3)  # no CPU round trips
    assert sched.total_s - look.total_s == pytest.approx(1e-3)  # the device part is the same


def test_join_only_in_spatial_plans(make_lm):
    lm_j, lm_0 = make_lm(calibration=HOST), make_lm(calibration=replace(HOST, join_s=0.0))
    mixed = (DEC, PRE)
    assert lm_j.predict_union(*mixed) == lm_0.predict_union(*mixed)  # aggregated: no join
    assert lm_j.predict(DEC) == lm_0.predict(DEC)
    d_j, p_j = lm_j.predict_concurrent(Batch.decode(1, 100), Batch.prefill(16), 20, 20)
    d_0, p_0 = lm_0.predict_concurrent(Batch.decode(1, 100), Batch.prefill(16), 20, 20)
    assert d_j == d_0  # the decode side's look-ahead steps do not wait for the join
    assert p_j.host_s - p_0.host_s == pytest.approx(30e-6)
    tab = lm_j.predict_concurrent_table(DEC, PRE, (40, 60), (92, 72))
    assert tab.prefill_alone_s[0] == lm_j.predict(PRE, 92, host="spatial",
                                                  after="lookahead").total_s


@pytest.mark.parametrize("decode_host", ["lookahead", "lookahead_eager"])
def test_the_prefill_starts_after_one_decode_steps_launch(make_lm, decode_host):
    """The runtime launches decode step 0, then the prefill, then steps 1..k-1: the prefill
    side pays one decode step's launch (a graph replay, or the layers' eager launches), not k;
    the decode side pays nothing more; with no decode there is nothing to wait for."""
    lm = make_lm(calibration=HOST)
    step = 20e-6 if decode_host == "lookahead" else lm.model.num_layers * 80e-6
    dec, pre = Batch.decode(1, 100), Batch.prefill(16)  # no contention: the sides as alone
    d, p = lm.predict_concurrent(dec, pre, 20, 20, decode_host)
    assert d == lm.predict(dec, 20, host=decode_host)
    assert p.host_s == pytest.approx(lm.host_seconds(False, "spatial", 1) + step)
    assert p.total_s == pytest.approx(lm.predict(pre, 20, host="spatial").total_s + step)
    _, alone = lm.predict_concurrent([], PRE, 40, 92, decode_host)
    assert alone == lm.predict(PRE, 92, host="spatial")
    tab = lm.predict_concurrent_table(DEC, PRE, (40,), (92,), decode_host)
    assert tab.prefill_alone_s[0] == lm.predict(PRE, 92, "spatial", after=decode_host).total_s


def test_unknown_host_kind(make_lm):
    with pytest.raises(ValueError, match="lookahead"):
        make_lm().predict(DEC, host="eager")


def test_explain_names_the_host_row(make_lm):
    rows = make_lm(calibration=HOST).explain(DEC)
    assert rows[-1]["name"] == "host" and rows[-1]["seconds"] == pytest.approx(1.18e-3)
