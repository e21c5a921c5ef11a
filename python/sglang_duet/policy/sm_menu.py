"""SmMenu: the decode-partition sizes the optimizer may choose from.

Built once at start-up from the partition backend's granularity and limits. A spatial plan gives
``S_d`` (one of ``decode_sizes``) SMs to decode and the rest, ``total_sms - S_d``, to prefill;
decode-only and aggregated plans use the whole device.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SmMenu:
    total_sms: int
    decode_sizes: tuple[int, ...]
    granularity: int = 1

    def __post_init__(self) -> None:
        if self.total_sms < 2:
            raise ValueError(f"total_sms must be >= 2, got {self.total_sms}")
        sizes = tuple(self.decode_sizes)
        if list(sizes) != sorted(set(sizes)):
            raise ValueError(f"decode_sizes must be strictly increasing, got {sizes}")
        for s in sizes:
            if not 0 < s < self.total_sms:
                raise ValueError(f"decode size {s} outside (0, {self.total_sms})")
            if s % self.granularity:
                raise ValueError(f"decode size {s} not a multiple of {self.granularity}")
        object.__setattr__(self, "decode_sizes", sizes)

    @classmethod
    def from_granularity(
        cls, total_sms: int, granularity: int, min_decode: int, min_prefill: int
    ) -> SmMenu:
        """Every multiple of ``granularity`` that is >= ``min_decode`` and leaves
        ``>= min_prefill`` SMs to prefill."""
        if granularity < 1 or min_decode < 1 or min_prefill < 1:
            raise ValueError("granularity, min_decode and min_prefill must be >= 1")
        first = -(-min_decode // granularity) * granularity
        sizes = tuple(range(first, total_sms - min_prefill + 1, granularity))
        if not sizes:
            raise ValueError(
                f"no decode size fits: total={total_sms} granularity={granularity} "
                f"min_decode={min_decode} min_prefill={min_prefill}"
            )
        return cls(total_sms, sizes, granularity)

    @classmethod
    def tpc_masks(cls, total_sms: int, sms_per_tpc: int = 2) -> SmMenu:
        """TPC-mask backends (libsmctrl): whole TPCs, at least one TPC per side."""
        return cls.from_granularity(total_sms, sms_per_tpc, sms_per_tpc, sms_per_tpc)

    @classmethod
    def green_contexts(cls, total_sms: int, granularity: int = 8, minimum: int = 8) -> SmMenu:
        """CUDA green contexts on Hopper: groups of 8 SMs, at least 8 per side."""
        return cls.from_granularity(total_sms, granularity, minimum, minimum)

    def __len__(self) -> int:
        return len(self.decode_sizes)

    def prefill_sms(self, sms_decode: int) -> int:
        return self.total_sms - sms_decode

    def index_at_least(self, sms: int) -> int:
        """Index of the smallest size >= ``sms`` (``len(self)`` when none)."""
        return bisect.bisect_left(self.decode_sizes, sms)
