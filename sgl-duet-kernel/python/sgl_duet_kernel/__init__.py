"""sgl_duet_kernel: SM partitioning for sglang-duet (CUDA green contexts, libsmctrl masks).

Importing this package loads only the project's C library; the CUDA driver is opened on the
first call that needs it, so `import sgl_duet_kernel` works on machines without a GPU.
"""

from __future__ import annotations

from ._lib import ABI_VERSION, library_path
from .errors import (
    DriverUnavailable,
    GrantError,
    KernelError,
    LibsmctrlUnavailable,
    NotBuilt,
)
from .ops import (
    SPLIT_IGNORE_SM_COSCHEDULING,
    DeviceInfo,
    Granularity,
    GreenPair,
    device_count,
    device_info,
    driver_version,
    green_granularity,
    open_driver,
    smctrl_has_ext,
    smctrl_open,
    smctrl_set_stream_mask,
    smid_available,
    smid_record,
    smid_record_graph,
    stream_create,
    stream_destroy,
    stream_synchronize,
)

__version__ = "0.1.0"

__all__ = [
    "ABI_VERSION",
    "SPLIT_IGNORE_SM_COSCHEDULING",
    "DeviceInfo",
    "DriverUnavailable",
    "GrantError",
    "Granularity",
    "GreenPair",
    "KernelError",
    "LibsmctrlUnavailable",
    "NotBuilt",
    "device_count",
    "device_info",
    "driver_version",
    "green_granularity",
    "library_path",
    "open_driver",
    "smctrl_has_ext",
    "smctrl_open",
    "smctrl_set_stream_mask",
    "smid_available",
    "smid_record",
    "smid_record_graph",
    "stream_create",
    "stream_destroy",
    "stream_synchronize",
]
