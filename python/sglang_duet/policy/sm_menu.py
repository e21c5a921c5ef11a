"""SmMenu: the decode-partition sizes the optimizer may choose from.

Built once at start-up from the partition backend's granularity and limits. A spatial plan gives
``S_d`` (one of ``decode_sizes``) SMs to decode and the rest, ``total_sms - S_d``, to prefill;
decode-only and aggregated plans use the whole device.

``menu_decode_sizes`` and ``spread_evenly`` are the one place the sizes of a menu are computed
and thinned; ``partition.plan.menu_for`` is the one rule that applies them (the runtime's
partitions, the sizes that get decode CUDA graphs, the simulator's duet, the policy's default
menu), so the sizes the policy plans with are the ones the partitions create. An SmMenu is
only the result. Pure Python (no torch, no SGLang).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass


def menu_decode_sizes(
    total_sms: int, start: int, step: int, min_decode: int = 0, min_prefill: int = 0
) -> tuple[int, ...]:
    """The decode sizes S_d (SMs) a partition mechanism can make that leave both sides enough.

    The mechanism makes groups of ``start, start + step, start + 2 * step, ...`` SMs (green
    contexts on Hopper: 8, 16, ...; libsmctrl masks whole TPCs: 2, 4, ...). A size is kept when
    ``S_d >= min_decode`` SMs and the prefill side keeps ``total_sms - S_d >= min_prefill`` SMs,
    and always at least 1 SM (a split with an empty side is no split). Ascending; empty when
    nothing fits. Callers check their own limits (the minima's signs, ``total_sms``) first.
    """
    if start < 1 or step < 1:
        raise ValueError(f"start and step must be >= 1 SM, got start={start} step={step}")
    first = start + max(0, -(-(min_decode - start) // step)) * step  # first on the grid >= min
    last = total_sms - max(min_prefill, 1)
    return tuple(range(first, last + 1, step))


def spread_evenly(sizes: Iterable[int], n: int) -> tuple[int, ...]:
    """``n`` of ``sizes`` (SMs) evenly spread from the smallest to the largest, both ends kept.

    Thins a menu when each size costs something (a split's contexts and streams, a decode CUDA
    graph capture), keeping its whole range. Ascending and without repeats whatever the input
    order; all of them when ``n >= len(sizes)``, the smallest when ``n == 1``, none when
    ``n <= 0``. Picks index ``round(i * step)`` with ``step = (len - 1) / (n - 1)`` computed
    first, as the runtime always chose its graph sizes: on an exact .5 tie that float product can
    round the other way than ``round(i * (len - 1) / (n - 1))`` (30 sizes, n = 15: index 15, not
    14), and keeping it keeps the menus and graph sizes that runs already used.
    """
    ordered = sorted(set(sizes))
    if n <= 0 or not ordered:
        return ()
    if n >= len(ordered):
        return tuple(ordered)
    if n == 1:
        return (ordered[0],)
    step = (len(ordered) - 1) / (n - 1)
    return tuple(sorted({ordered[round(i * step)] for i in range(n)}))


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

    def __len__(self) -> int:
        return len(self.decode_sizes)

    def prefill_sms(self, sms_decode: int) -> int:
        return self.total_sms - sms_decode

    def index_at_least(self, sms: int) -> int:
        """Index of the smallest size >= ``sms`` (``len(self)`` when none)."""
        return bisect.bisect_left(self.decode_sizes, sms)
