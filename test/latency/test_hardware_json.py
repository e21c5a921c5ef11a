"""A hardware profile saved as JSON loads back through get_hardware (the CPU profile the
sim-to-real check fits, benchmark/sim_to_real)."""

from __future__ import annotations

import json

import pytest

from sglang_duet.latency import get_hardware
from sglang_duet.latency.hardware import save_hardware


def test_round_trip_and_errors(tmp_path):
    h100 = get_hardware("h100-sxm")
    path = tmp_path / "gpu.json"
    save_hardware(h100, path)
    assert get_hardware(str(path)) == h100 and get_hardware(path) == h100
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x"}))
    with pytest.raises(ValueError, match="not a hardware profile"):
        get_hardware(str(bad))
    with pytest.raises(ValueError, match="or a profile JSON"):
        get_hardware(str(tmp_path / "missing.json"))
