"""Granularity of each partition mechanism and the decode sizes a menu offers (pure Python).

All counts are SMs. A menu entry with decode size S_d gives the decode stream S_d SMs and the
prefill stream the other `total_sms - S_d`.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MIN_SMS = 16  # per side, as in SGLang's pdmux menu (prefill >= decode >= 16)


@dataclass(frozen=True)
class Granularity:
    """Possible decode-group sizes: `min_sms`, `min_sms + step_sms`, ... (SMs)."""

    min_sms: int
    step_sms: int
    source: str = "table"  # driver | probe | table | tpc

    def __post_init__(self) -> None:
        if self.min_sms < 1 or self.step_sms < 1:
            raise ValueError(f"bad granularity {self}")


@dataclass(frozen=True)
class GpuShape:
    """Enough of a GPU to plan a menu without one: SM count and compute capability."""

    name: str
    num_sms: int
    cc: tuple[int, int]
    sms_per_tpc: int = 2


# Hypothetical devices for `python -m sglang_duet.partition --hardware ...` on a CPU machine.
GPU_SHAPES: dict[str, GpuShape] = {
    "h100": GpuShape("h100-sxm", 132, (9, 0)),
    "h100-sxm": GpuShape("h100-sxm", 132, (9, 0)),
    "h200": GpuShape("h200", 132, (9, 0)),
    "a100": GpuShape("a100-80g", 108, (8, 0)),
    "a100-80g": GpuShape("a100-80g", 108, (8, 0)),
}


def green_ctx_table_granularity(cc: tuple[int, int]) -> Granularity:
    """NVIDIA's per-architecture guideline for green-context splits (CUDA 12.4 - 13.0 docs)."""
    if cc[0] >= 9:
        return Granularity(8, 8, "table")
    if cc[0] == 8:
        return Granularity(4, 2, "table")
    return Granularity(2, 2, "table")


def tpc_granularity(sms_per_tpc: int = 2) -> Granularity:
    """libsmctrl masks whole TPCs: any number of TPCs, i.e. steps of `sms_per_tpc` SMs."""
    return Granularity(sms_per_tpc, sms_per_tpc, "tpc")


def decode_sizes(
    total_sms: int,
    gran: Granularity,
    min_decode: int = DEFAULT_MIN_SMS,
    min_prefill: int = DEFAULT_MIN_SMS,
    max_sizes: int | None = None,
) -> tuple[int, ...]:
    """Every decode size S_d (SMs) with S_d >= min_decode and total_sms - S_d >= min_prefill.

    S_d runs over the sizes the mechanism can make (`gran`), computed by the policy's
    `menu_decode_sizes` so this menu and the policy's `SmMenu` agree. `max_sizes` thins the list
    evenly (`spread_evenly`), always keeping the smallest and the largest size.
    """
    # Imported here, as in partition_menu: importing the partition package stays light.
    from sglang_duet.policy.sm_menu import menu_decode_sizes, spread_evenly

    if total_sms <= 0 or min_decode < 0 or min_prefill < 0:
        raise ValueError("total_sms must be > 0 and the minima >= 0")
    sizes = menu_decode_sizes(total_sms, gran.min_sms, gran.step_sms, min_decode, min_prefill)
    if max_sizes is not None and len(sizes) > max_sizes:
        if max_sizes < 2:
            raise ValueError("max_sizes must be >= 2")
        sizes = spread_evenly(sizes, max_sizes)
    return sizes
