"""The one computation of a menu's decode sizes (SMs) and of its even thinning."""

from __future__ import annotations

import itertools

import pytest

from sglang_duet.partition.plan import menu_for
from sglang_duet.partition.sizes import Granularity, decode_sizes
from sglang_duet.policy import menu_decode_sizes, spread_evenly

H100_GREEN = tuple(range(16, 113, 8))  # 13 sizes: 8-SM groups, >= 16 SMs per side, 132 SMs


def reference_sizes(total, start, step, min_decode, min_prefill):
    """Every size from 1 to total - 1 SMs, kept when the mechanism can make it and both sides
    get their minimum (the prefill side at least 1 SM)."""
    return tuple(
        s
        for s in range(1, total)
        if s >= start
        and (s - start) % step == 0
        and s >= min_decode
        and total - s >= max(min_prefill, 1)
    )


class TestMenuDecodeSizes:
    def test_equals_the_reference_on_a_grid(self):
        grid = itertools.product(
            range(1, 150, 7), (1, 2, 3, 4, 8, 16), (1, 2, 4, 5, 8), (0, 1, 7, 16, 33), (0, 1, 9, 16)
        )
        for total, start, step, min_d, min_p in grid:
            want = reference_sizes(total, start, step, min_d, min_p)
            assert menu_decode_sizes(total, start, step, min_d, min_p) == want, (
                total, start, step, min_d, min_p,
            )

    def test_hopper_green_contexts_and_tpc_masks(self):
        assert menu_decode_sizes(132, 8, 8, 16, 16) == H100_GREEN
        assert menu_decode_sizes(132, 2, 2, 16, 16) == tuple(range(16, 117, 2))
        assert menu_decode_sizes(108, 4, 2, 1, 1) == tuple(range(4, 107, 2))  # A100, min 4

    def test_min_decode_off_the_grid_rounds_up_and_prefill_keeps_one_sm(self):
        assert menu_decode_sizes(132, 8, 8, 20, 16)[0] == 24
        assert menu_decode_sizes(10, 1, 1)[-1] == 9
        assert menu_decode_sizes(32, 8, 8, 24, 16) == ()

    @pytest.mark.parametrize(("start", "step"), [(0, 8), (8, 0), (-2, 2)])
    def test_a_mechanism_makes_at_least_one_sm_per_step(self, start, step):
        with pytest.raises(ValueError, match="start and step must be >= 1"):
            menu_decode_sizes(132, start, step)

    def test_all_menus_use_it(self):
        for total, g, m in itertools.product((16, 108, 132), (1, 2, 8), (1, 8, 16)):
            sizes = menu_decode_sizes(total, g, g, m, m)
            assert decode_sizes(total, Granularity(g, g), m, m) == sizes
            if sizes:
                plan = menu_for("libsmctrl", total, Granularity(g, g), 0, False, m, m)
                assert plan.sm_menu.decode_sizes == sizes


class TestSpreadEvenly:
    @pytest.mark.parametrize(
        ("sizes", "n", "want"),
        [
            ((16, 24, 32, 40, 48), 0, ()),
            ((16, 24, 32, 40, 48), -1, ()),
            ((16, 24, 32, 40, 48), 1, (16,)),
            ((16, 24, 32, 40, 48), 2, (16, 48)),
            ((16, 24, 32, 40, 48), 3, (16, 32, 48)),
            ((16, 24, 32, 40, 48), 9, (16, 24, 32, 40, 48)),
            ((48, 16, 32, 16), 5, (16, 32, 48)),  # sorted, repeats dropped
            (H100_GREEN, 6, (16, 32, 56, 72, 96, 112)),
            (H100_GREEN, 4, (16, 48, 80, 112)),
            ((), 4, ()),
        ],
    )
    def test_cases(self, sizes, n, want):
        assert spread_evenly(sizes, n) == want

    def test_a_tie_rounds_as_the_runtime_always_did(self):
        """30 sizes, 15 kept: the 8th pick is index 14.5 exactly; the float step rounds it to
        15 (`round(7 * (29 / 14))`), where `round(7 * 29 / 14)` would give 14."""
        assert spread_evenly(range(30), 15)[7] == 15
        assert spread_evenly(range(76), 19)[15] == 63
        assert spread_evenly(range(116), 15)[7] == 57

    @pytest.mark.parametrize("length", [2, 3, 13, 30, 76, 116, 143])
    def test_n_picks_both_ends_each_within_half_a_place(self, length):
        sizes = tuple(range(100, 100 + 2 * length, 2))
        for n in range(2, min(length, 21) + 1):
            got = spread_evenly(sizes, n)
            assert len(got) == n and got[0] == sizes[0] and got[-1] == sizes[-1]
            for i, s in enumerate(got):
                ideal = i * (length - 1) / (n - 1)
                assert abs(sizes.index(s) - ideal) <= 0.5 + 1e-9, (length, n, i)

    def test_partition_max_sizes_thins_the_same_way(self):
        full = decode_sizes(31, Granularity(1, 1), 0, 0)
        assert full == tuple(range(1, 31))  # 30 sizes: the tie above
        thin = decode_sizes(31, Granularity(1, 1), 0, 0, max_sizes=15)
        assert thin == spread_evenly(full, 15) and thin[7] == 16
