"""SimConfig.interference reaches the LatencyModel the simulator builds."""

from __future__ import annotations

import pytest
from sim_helpers import make_workload

from sglang_duet.latency.interference import PUBLISHED
from sglang_duet.sim import SimConfig, Simulation


def test_the_simulator_uses_the_configured_interference():
    w = make_workload([0.0], [100], [2])
    assert SimConfig().interference == "published"
    for name, want in (("published", PUBLISHED["h100-sxm"]), ("none", None)):
        sim = Simulation(SimConfig(policy="sglang-pdmux", interference=name), w, "sglang-pdmux")
        assert sim.latency.interference == want


def test_unknown_interference_is_a_config_error():
    with pytest.raises(ValueError, match="unknown interference 'x'; choices: published, none"):
        SimConfig(interference="x").validate()
