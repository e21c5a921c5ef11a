"""Menu generation for H100, H200 and A100 granularities."""

from __future__ import annotations

import pytest

from sglang_duet.partition.sizes import (
    GPU_SHAPES,
    Granularity,
    decode_sizes,
    green_ctx_table_granularity,
    tpc_granularity,
)


class TestGranularityTable:
    def test_hopper_is_8_by_8(self):
        assert green_ctx_table_granularity((9, 0)) == Granularity(8, 8, "table")

    def test_ampere_is_min4_step2(self):
        g = green_ctx_table_granularity((8, 0))
        assert (g.min_sms, g.step_sms) == (4, 2)

    def test_tpc(self):
        g = tpc_granularity()
        assert (g.min_sms, g.step_sms, g.source) == (2, 2, "tpc")

    def test_shapes(self):
        assert GPU_SHAPES["h100"].num_sms == 132
        assert GPU_SHAPES["h200"].num_sms == 132
        assert GPU_SHAPES["a100"].num_sms == 108


class TestDecodeSizes:
    @pytest.mark.parametrize("hw", ["h100", "h200"])
    def test_hopper_green_ctx(self, hw):
        shape = GPU_SHAPES[hw]
        sizes = decode_sizes(shape.num_sms, green_ctx_table_granularity(shape.cc), 16, 16)
        assert sizes == tuple(range(16, 113, 8))
        assert len(sizes) == 13

    def test_hopper_green_ctx_minimum_8(self):
        sizes = decode_sizes(132, Granularity(8, 8), 8, 8)
        assert sizes[0] == 8 and sizes[-1] == 120  # 132 - 120 = 12 >= 8; 128 leaves 4

    def test_a100_green_ctx(self):
        sizes = decode_sizes(108, green_ctx_table_granularity((8, 0)), 16, 16)
        assert sizes == tuple(range(16, 93, 2))

    def test_a100_small_minimum_uses_driver_minimum(self):
        sizes = decode_sizes(108, Granularity(4, 2), 1, 1)
        assert sizes[0] == 4 and sizes[-1] == 106

    def test_h100_tpc_masks(self):
        sizes = decode_sizes(132, tpc_granularity(), 16, 16)
        assert sizes == tuple(range(16, 117, 2))

    def test_min_decode_not_on_grid_rounds_up(self):
        assert decode_sizes(132, Granularity(8, 8), 20, 16)[0] == 24

    def test_every_side_respects_minimum(self):
        for total, g in [(132, Granularity(8, 8)), (108, Granularity(4, 2))]:
            for s in decode_sizes(total, g, 24, 40):
                assert s >= 24 and total - s >= 40
                assert (s - g.min_sms) % g.step_sms == 0

    def test_empty_when_nothing_fits(self):
        assert decode_sizes(32, Granularity(8, 8), 24, 16) == ()

    def test_thinning_keeps_ends(self):
        full = decode_sizes(132, Granularity(8, 8), 16, 16)
        thin = decode_sizes(132, Granularity(8, 8), 16, 16, max_sizes=4)
        assert len(thin) == 4
        assert thin[0] == full[0] and thin[-1] == full[-1]
        assert set(thin) <= set(full)

    def test_matches_policy_sm_menu(self):
        from sglang_duet.partition.plan import menu_for

        for total, g in [(132, Granularity(8, 8)), (108, Granularity(4, 2))]:
            ours = decode_sizes(total, g, 16, 16)
            theirs = menu_for("libsmctrl", total, g, 0, False, 16, 16).sm_menu.decode_sizes
            assert ours == theirs
