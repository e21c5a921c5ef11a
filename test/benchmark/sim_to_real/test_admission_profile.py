"""The contended CPU profile: the slowdown a run's SGLang log shows against the committed
profile, and that profile with every predicted time multiplied by it."""

from __future__ import annotations

import pytest

from benchmark.sim_to_real.admission import SIM_TO_REAL
from benchmark.sim_to_real.admission_profile import (
    contended_profile,
    measured_slowdown,
    profile_paths,
)
from sglang_duet.latency import Batch, Calibration, LatencyModel, get_hardware
from sglang_duet.latency.calibration import HOST_FIELDS
from sglang_duet.latency.model import ModelSpec

CAL = "cpu_calibration_sglang-chunked.json"


def model(hw: str, cal: str, cfg: str) -> LatencyModel:
    return LatencyModel(get_hardware(hw), ModelSpec.from_hf_config(cfg), Calibration.load(cal))


def test_contended_profile_multiplies_every_time_by_the_slowdown(tmp_path):
    cfg, hw, cal = profile_paths(SIM_TO_REAL, CAL)
    hw2, cal2 = contended_profile(SIM_TO_REAL, CAL, 4 / 3, str(tmp_path), "x")
    a, b = get_hardware(hw), get_hardware(hw2)
    assert b.flops == pytest.approx(0.75 * a.flops) and b.hbm_bw == pytest.approx(0.75 * a.hbm_bw)
    c, d = Calibration.load(cal), Calibration.load(cal2)
    for k in HOST_FIELDS:
        assert getattr(d, k) == pytest.approx(getattr(c, k) / 0.75)
    base, slow = model(hw, cal, cfg), model(hw2, cal2, cfg)
    for q, ctx in ((128, 0), (64, 900), (1, 300)):
        t0 = base.predict(Batch([q], [ctx])).total_s
        assert slow.predict(Batch([q], [ctx])).total_s == pytest.approx(t0 / 0.75, rel=1e-6)


def test_slowdown_must_be_positive(tmp_path):
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError):
            contended_profile(SIM_TO_REAL, CAL, bad, str(tmp_path), "x")


def log(rate: float) -> str:
    """Prefill lines of one chunk each, logged at `rate` tokens/s (SGLang 0.5.17's format)."""
    line = ("[2026-12-01 22:17:{s:02d}] Prefill batch, #new-seq: 1, #new-token: {n}, "
            "#cached-token: 0, token usage: 0.10, #running-req: 0, #queue-req: 3, "
            "#pending-token: 500, cpu graph: False, input throughput (token/s): {r:.2f}")
    return "\n".join(line.format(s=k, n=64 + 16 * k, r=rate) for k in range(8)) + "\n"


def test_slowdown_is_logged_over_predicted_time(tmp_path):
    slow, fast = tmp_path / "slow.log", tmp_path / "fast.log"
    slow.write_text(log(100.0))
    fast.write_text(log(200.0))
    a = measured_slowdown(SIM_TO_REAL, CAL, False, str(slow))
    b = measured_slowdown(SIM_TO_REAL, CAL, False, str(fast))
    assert a["iterations"] == b["iterations"] > 0
    assert a["slowdown"] == pytest.approx(2 * b["slowdown"], rel=1e-3)
    assert measured_slowdown(SIM_TO_REAL, CAL, False, str(tmp_path / "none.log")) is None
