"""TPC-mask arithmetic: which bits, polarity (set = disabled), 128-bit halves."""

from __future__ import annotations

import pytest

from sglang_duet.partition.masks import (
    MASK_BITS,
    allowed_tpcs,
    disable_mask_allowing,
    join_u128,
    pair_masks,
    sms_to_tpcs,
    split_u128,
    tpc_bits,
)

ALL = (1 << 128) - 1


class TestTpcBits:
    def test_range_sets_exactly_those_bits(self):
        assert tpc_bits(2, 5) == 0b11100
        assert tpc_bits(0, 1) == 1
        assert tpc_bits(3, 3) == 0

    def test_full_width(self):
        assert tpc_bits(0, 128) == ALL
        assert tpc_bits(127, 128) == 1 << 127

    @pytest.mark.parametrize("first,stop", [(-1, 3), (4, 3), (0, 129)])
    def test_rejects_bad_ranges(self, first, stop):
        with pytest.raises(ValueError):
            tpc_bits(first, stop)


class TestPolarity:
    def test_allowing_range_clears_only_that_range(self):
        # "allow TPCs 2-4" = every other bit set
        mask = disable_mask_allowing(2, 5)
        assert mask == ALL & ~0b11100
        assert allowed_tpcs(mask) == [2, 3, 4]

    def test_tpcs_above_64_are_disabled_for_decode(self):
        decode, _ = pair_masks(10)
        lo, hi = split_u128(decode)
        assert lo == ALL >> 64 & ~((1 << 10) - 1)
        assert hi == (1 << 64) - 1  # H100 physical TPC ids 64.. stay off for decode

    def test_pair_is_disjoint_and_covers_everything(self):
        for a in (1, 8, 33, 64, 65, 66, 127):
            decode, prefill = pair_masks(a)
            on_d, on_p = set(allowed_tpcs(decode)), set(allowed_tpcs(prefill))
            assert on_d == set(range(a))
            assert on_p == set(range(a, MASK_BITS))
            assert not on_d & on_p
            # the disabled sets complement each other: decode's off bits = prefill's on bits
            assert decode & prefill == 0 and decode | prefill == ALL

    def test_h100_split_crosses_the_64_bit_boundary(self):
        # 66 TPCs: decode takes 40 TPCs, prefill the other 26 (two of them in the high word)
        _, prefill = pair_masks(40)
        lo, hi = split_u128(prefill)
        assert lo == (1 << 40) - 1
        assert hi == 0


class TestU128:
    def test_split_join_round_trip(self):
        for mask in (0, 1, 1 << 63, 1 << 64, ALL, 0x0123456789ABCDEF_FEDCBA9876543210):
            lo, hi = split_u128(mask)
            assert 0 <= lo < 1 << 64 and 0 <= hi < 1 << 64
            assert join_u128(lo, hi) == mask

    def test_split_rejects_out_of_range(self):
        with pytest.raises(ValueError):
            split_u128(1 << 128)
        with pytest.raises(ValueError):
            split_u128(-1)
        with pytest.raises(ValueError):
            join_u128(1 << 64, 0)


class TestSmsToTpcs:
    def test_whole_tpcs(self):
        assert sms_to_tpcs(132) == 66
        assert sms_to_tpcs(16) == 8

    def test_half_tpc_rejected(self):
        with pytest.raises(ValueError):
            sms_to_tpcs(17)
