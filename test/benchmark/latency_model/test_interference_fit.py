"""The library's interference coefficients are the fit to the published points, and the model
reproduces the points it was fitted to (benchmark/latency_model/interference)."""

from __future__ import annotations

from benchmark.latency_model.interference import fit
from benchmark.latency_model.interference.compare import compare
from sglang_duet.latency import Calibration
from sglang_duet.latency.interference import CLOCK, PUBLISHED
from sglang_duet.sim import SimConfig


def _cal() -> Calibration:
    return Calibration.load(SimConfig().calibration)


def test_library_coefficients_are_the_fit():
    drift = fit.library_matches_fit(_cal())
    assert not drift, ("rerun python -m benchmark.latency_model.interference and copy its "
                       f"coefficients into latency/interference.py: {drift}")


def test_points_and_sources():
    pts = {p["id"]: p for p in fit.points()}
    assert {"mux-a100", "mux-h100", "bul-gemm", "he-power"} <= set(pts)
    for p in pts.values():
        assert p["source"] and p["locator"] and p["use"] in ("fit", "check", "input", "context")
    assert abs(CLOCK - float(pts["he-power"]["published"])) < 5e-4  # 295 / 257 - 1
    assert PUBLISHED["h100-sxm"].decode_max == float(pts["mux-h100"]["published"])
    assert PUBLISHED["a100-80g"].decode_max == float(pts["mux-a100"]["published"])


def test_model_reproduces_the_fitted_points():
    rows = {r["id"]: r for r in compare(_cal())[0]}
    # MuxWise's maxima: the larger model's within a point, both within 3; Bullet's bound at 40%
    assert abs(rows["mux-h100"]["model_value"] - 0.30) < 0.01
    assert abs(rows["mux-a100"]["model_value"] - 0.20) < 0.01
    assert "worst residual" in rows["mux-h100"]["verdict"]
    for pid in ("mux-h100", "mux-a100"):
        worst = float(rows[pid]["verdict"].split("residual ")[1].split(" ")[0])
        assert worst < 3.0
    assert abs(rows["bul-gemm"]["model_value"] - 0.08) < 1e-3
    assert rows["bul-order"]["verdict"] == "reproduced"
