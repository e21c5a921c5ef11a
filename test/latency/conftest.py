"""Builders shared by the latency tests."""

from __future__ import annotations

import pytest

from sglang_duet.latency import Calibration, LatencyModel, get_hardware, get_model


def _make_lm(model: str = "qwen3-8b", hardware: str = "h100-sxm", tp: int = 1,
             calibration: Calibration | None = None) -> LatencyModel:
    return LatencyModel(get_hardware(hardware), get_model(model, tp), calibration)


@pytest.fixture(scope="session")
def make_lm():
    """Factory: make_lm(model="qwen3-8b", hardware="h100-sxm", tp=1, calibration=None)."""
    return _make_lm
