"""Online correction: bounded EWMA per (mode, phase), exact raw-prediction recovery."""

from __future__ import annotations

import math

import pytest

from sglang_duet.policy import Correction, DuetPolicy, ReqState


def test_ewma_clamp_and_disable():
    c = Correction(alpha=0.5, lo=0.25, hi=4.0)
    assert c.factor("aggregated", "total") == 1.0
    c.update("aggregated", "total", 2.0, 1.0)
    assert c.factor("aggregated", "total") == pytest.approx(1.5)
    for _ in range(50):
        c.update("aggregated", "total", 100.0, 1.0)  # ratio clamped to 4
    assert c.factor("aggregated", "total") == pytest.approx(4.0)
    for _ in range(50):
        c.update("aggregated", "total", 1e-6, 1.0)
    assert c.factor("aggregated", "total") == pytest.approx(0.25)
    c.update("spatial", "decode", math.nan, 1.0)
    c.update("spatial", "decode", 1.0, 0.0)
    assert c.factor("spatial", "decode") == 1.0
    off = Correction(enabled=False)
    off.update("aggregated", "total", 2.0, 1.0)
    assert off.factor("aggregated", "total") == 1.0


def _light():
    decodes = [ReqState(f"d{i}", 200, 200, 3) for i in range(4)]
    waiting = [ReqState("w", 300, 0, 0)]
    return decodes, waiting


def test_observe_converges_to_the_measured_ratio():
    pol = DuetPolicy.build("aggregated", 0.1)
    decodes, waiting = _light()
    raw = pol.plan(decodes, waiting).predicted_total_s
    for _ in range(200):
        plan = pol.plan(decodes, waiting)
        pol.observe(plan, measured_s=1.7 * raw)
    assert pol.correction.factor("aggregated", "total") == pytest.approx(1.7, rel=1e-6)
    assert pol.plan(decodes, waiting).predicted_total_s == pytest.approx(1.7 * raw, rel=1e-6)


def test_observe_uses_the_factors_the_plan_was_made_with():
    pol = DuetPolicy.build("aggregated", 0.1)
    decodes, waiting = _light()
    old = pol.plan(decodes, waiting)  # predicted with factor 1
    raw = old.predicted_total_s
    pol.correction.update("aggregated", "total", 3.0 * raw, raw)  # factor moves meanwhile
    f_before = pol.correction.factor("aggregated", "total")
    pol.observe(old, measured_s=raw)  # exactly as predicted -> ratio 1
    alpha = pol.correction.alpha
    assert pol.correction.factor("aggregated", "total") == pytest.approx(
        (1 - alpha) * f_before + alpha * 1.0
    )


def test_spatial_observations_update_their_phase():
    pol = DuetPolicy.build("spatial", 0.1)
    decodes = [ReqState(f"d{i}", 4096, 4096, 1) for i in range(64)]
    waiting = [ReqState("w", 8192, 0, 0)]
    plan = pol.plan(decodes, waiting)
    assert plan.mode == "spatial"
    pol.observe(plan, 1.0, decode_s=2 * plan.predicted_decode_s)
    f_d = pol.correction.factor("spatial", "decode")
    assert f_d > 1.0 and pol.correction.factor("spatial", "prefill") == 1.0
    pol.observe(plan, 1.0, prefill_s=0.5 * plan.predicted_prefill_s)
    assert pol.correction.factor("spatial", "prefill") < 1.0
    assert pol.correction.factor("aggregated", "total") == 1.0
    # corrected predictions feed the next plan
    again = pol.plan(decodes, waiting)
    assert again.sms_decode >= plan.sms_decode


def test_correction_can_be_disabled():
    pol = DuetPolicy.build("aggregated", 0.1, correction=False)
    decodes, waiting = _light()
    plan = pol.plan(decodes, waiting)
    pol.observe(plan, 10 * plan.predicted_total_s)
    assert pol.plan(decodes, waiting) == plan


def test_idle_observation_is_ignored():
    pol = DuetPolicy.build("adaptive", 0.1)
    plan = pol.plan([], [])
    assert plan.mode == "idle"
    pol.observe(plan, 1.0)
    assert set(pol.correction.factors().values()) == {1.0}


def test_margin_is_one_while_exact_and_grows_with_jitter():
    c = Correction()
    for _ in range(20):
        c.update("spatial", "decode", 0.05, 0.05)
    assert c.margin("spatial", "decode") == 1.0
    for i in range(40):  # measured alternates 20% above and below the prediction
        c.update("spatial", "decode", 0.05 * (1.2 if i % 2 else 0.8), 0.05)
    m = c.margin("spatial", "decode")
    assert 1.2 < m < 1.0 + 2 * 0.25 / c.factor("spatial", "decode") + 1e-9
    c.reset()
    assert c.margin("spatial", "decode") == 1.0


def test_gap_policy_plans_with_the_learned_margin():
    """Jittery spatial measurements shrink the tau a spatial plan is sized for."""
    decodes = [ReqState(f"d{i}", 4096, 4096, 1) for i in range(64)]
    waiting = [ReqState("w", 8192, 0, 0)]
    pol = DuetPolicy.build("adaptive", 0.1)
    pol.sized = False  # the spatial plan itself is under test, not what it is weighed against
    calm = pol.plan(decodes, waiting)
    assert calm.mode == "spatial"
    for i in range(40):
        f = 1.3 if i % 2 else 0.7
        pol.observe(calm, calm.predicted_total_s, calm.predicted_decode_s * f,
                    calm.predicted_prefill_s)
    jittery = pol.plan(decodes, waiting)
    assert jittery.mode == "spatial" and jittery.predicted_decode_s < calm.predicted_decode_s
    assert "tau=" in jittery.reason and "tau=100.0ms" not in jittery.reason
