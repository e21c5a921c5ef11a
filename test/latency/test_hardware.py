from __future__ import annotations

import pytest

from sglang_duet.latency import HARDWARE, get_hardware
from sglang_duet.latency.hardware import bandwidth_curve, knee_for


class TestProfiles:
    def test_builtin_names(self):
        assert {"h100-sxm", "h200", "a100-80g"} <= set(HARDWARE)

    def test_vendor_numbers(self):
        h100, h200, a100 = (get_hardware(n) for n in ("h100-sxm", "h200", "a100-80g"))
        assert (h100.num_sms, h100.flops, h100.hbm_bw, h100.link_bw) == (132, 989e12, 3.35e12,
                                                                         450e9)
        assert h200.flops == h100.flops and h200.hbm_bw == 4.8e12 and h200.hbm_bytes > 140e9
        assert (a100.num_sms, a100.flops, a100.hbm_bw, a100.link_bw) == (108, 312e12, 2.039e12,
                                                                         300e9)

    def test_unknown_name_lists_choices(self):
        with pytest.raises(ValueError, match="h100-sxm"):
            get_hardware("h100-pcie")

    def test_short_names_are_aliases(self):  # #16: the names the partition CLI suggests
        assert get_hardware("h100") is get_hardware("h100-sxm")
        assert get_hardware("a100") is get_hardware("a100-80g")


class TestComputeCurve:
    def test_full_device_is_peak(self):
        hw = get_hardware("h100-sxm")
        assert hw.compute() == hw.compute(132) == hw.flops

    def test_linear_in_whole_tpcs(self):
        hw = get_hardware("h100-sxm")
        assert hw.compute(66) == pytest.approx(hw.flops / 2)
        assert hw.compute(33) == hw.compute(32)  # an odd SM count wastes half a TPC
        assert hw.compute(1) == hw.compute(2) > 0  # at least one TPC

    def test_out_of_range(self):
        hw = get_hardware("h100-sxm")
        with pytest.raises(ValueError):
            hw.compute(0)
        with pytest.raises(ValueError):
            hw.bandwidth(133)


class TestBandwidthCurve:
    def test_paper_fig3a_point(self):
        # DuetServe Fig. 3a: ~60% of peak bandwidth with 20% of the SMs (H100).
        hw = get_hardware("h100-sxm")
        assert hw.bandwidth_fraction(26) == pytest.approx(0.6, abs=0.03)

    def test_super_linear_then_saturating(self):
        hw = get_hardware("h100-sxm")
        fracs = [hw.bandwidth_fraction(s) for s in range(2, 133, 2)]
        assert all(b > a for a, b in zip(fracs, fracs[1:], strict=False))
        # above the SM fraction everywhere inside (the "more than linear" share) ...
        assert all(f > s / 132 for f, s in zip(fracs[:-1], range(2, 132, 2), strict=True))
        # ... convex at the start, concave (saturating) later
        d = [b - a for a, b in zip(fracs, fracs[1:], strict=False)]
        assert d[1] > d[0]
        assert d[-1] < d[10] / 10
        assert fracs[-1] == pytest.approx(1.0)

    def test_knee_for_inverts_curve(self):
        k = knee_for(0.3, 0.7, 2.5)
        assert bandwidth_curve(0.3, k, 2.5) == pytest.approx(0.7)
        assert bandwidth_curve(1.0, k, 2.5) == pytest.approx(1.0)
        assert bandwidth_curve(0.0, k, 2.5) == 0.0
