"""The contended CPU profile: every predicted time divided by the share of a core the server
got (peaks scaled down, host seconds up), written next to the results."""

from __future__ import annotations

import pytest

from benchmark.sim_to_real.admission import SIM_TO_REAL
from benchmark.sim_to_real.admission_profile import contended_profile, profile_paths
from sglang_duet.latency import Batch, Calibration, LatencyModel, get_hardware
from sglang_duet.latency.calibration import HOST_FIELDS
from sglang_duet.latency.model import ModelSpec

CAL = "cpu_calibration_sglang-chunked.json"


def model(hw: str, cal: str, cfg: str) -> LatencyModel:
    return LatencyModel(get_hardware(hw), ModelSpec.from_hf_config(cfg), Calibration.load(cal))


def test_contended_profile_divides_every_time_by_the_core_share(tmp_path):
    cfg, hw, cal = profile_paths(SIM_TO_REAL, CAL)
    hw2, cal2 = contended_profile(SIM_TO_REAL, CAL, 0.25, str(tmp_path), "x")
    a, b = get_hardware(hw), get_hardware(hw2)
    assert b.flops == pytest.approx(0.75 * a.flops) and b.hbm_bw == pytest.approx(0.75 * a.hbm_bw)
    c, d = Calibration.load(cal), Calibration.load(cal2)
    for k in HOST_FIELDS:
        assert getattr(d, k) == pytest.approx(getattr(c, k) / 0.75)
    base, slow = model(hw, cal, cfg), model(hw2, cal2, cfg)
    for q, ctx in ((128, 0), (64, 900), (1, 300)):
        t0 = base.predict(Batch([q], [ctx])).total_s
        assert slow.predict(Batch([q], [ctx])).total_s == pytest.approx(t0 / 0.75, rel=1e-6)


def test_wait_share_must_leave_some_core(tmp_path):
    for bad in (1.0, -0.1):
        with pytest.raises(ValueError):
            contended_profile(SIM_TO_REAL, CAL, bad, str(tmp_path), "x")
