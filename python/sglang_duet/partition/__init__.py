"""SM partitioning for the spatial mode: backends (green-ctx, libsmctrl, none) and PartitionMenu.

Pure Python at import time: torch and the compiled `sgl_duet_kernel` are imported only by the
calls that need a GPU. `python -m sglang_duet.partition` reports what is usable here.
"""

from __future__ import annotations

from .base import PartitionBackend, PartitionError, RawPair
from .events import cross_context_events
from .partition_menu import MenuEntry, PartitionMenu, build_partition_menu
from .registry import AUTO_ORDER, BACKEND_NAMES, BACKENDS, get_backend, probe_all, select_backend
from .sizes import DEFAULT_MIN_SMS, GPU_SHAPES, GpuShape, Granularity, decode_sizes

__all__ = [
    "AUTO_ORDER",
    "BACKENDS",
    "BACKEND_NAMES",
    "DEFAULT_MIN_SMS",
    "GPU_SHAPES",
    "GpuShape",
    "Granularity",
    "MenuEntry",
    "PartitionBackend",
    "PartitionError",
    "PartitionMenu",
    "RawPair",
    "build_partition_menu",
    "cross_context_events",
    "decode_sizes",
    "get_backend",
    "probe_all",
    "select_backend",
]
