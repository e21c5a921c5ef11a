"""What every partition backend provides, and the raw stream pair it hands out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import ClassVar

from .sizes import Granularity


class PartitionError(RuntimeError):
    """A backend could not build a partition (e.g. it granted fewer SMs than asked)."""


@dataclass
class RawPair:
    """A (decode, prefill) pair of raw CUstream handles on disjoint SM sets.

    `decode_sms` / `prefill_sms` are the SMs each stream may use as granted by the mechanism
    (green contexts report them; libsmctrl counts are nominal: 2 SMs per allowed TPC).
    `close` releases both streams; the handles are invalid afterwards.
    """

    decode_stream: int
    prefill_stream: int
    decode_sms: int
    prefill_sms: int
    close: Callable[[], None]


def import_kernel() -> ModuleType:
    """The compiled `sgl_duet_kernel` module; ImportError says how to build it."""
    try:
        import sgl_duet_kernel
    except ImportError as exc:
        raise ImportError(
            f"sgl_duet_kernel is not installed ({exc}); build it with "
            "`pip install --no-build-isolation ./sgl-duet-kernel`"
        ) from exc
    return sgl_duet_kernel


def kernel_and_driver() -> tuple[ModuleType | None, int | str]:
    """(kernel module, CUDA driver version) or (None, why neither can be had here)."""
    try:
        k = import_kernel()
    except ImportError as exc:
        return None, str(exc)
    try:
        return k, k.driver_version()
    except k.DriverUnavailable as exc:
        return None, str(exc)


class PartitionBackend(ABC):
    """One SM-partitioning mechanism. Instances are cheap; nothing touches the GPU until asked.

    `available()` never raises: it returns (False, reason) when the mechanism cannot be used
    here. `granularity`, `num_sms` and `create_pair` may only be called when it is available.
    """

    name: ClassVar[str]
    partitions: ClassVar[bool] = True  # False for `none`: one stream, no split

    @abstractmethod
    def available(self, device: int = 0) -> tuple[bool, str]: ...

    def num_sms(self, device: int = 0) -> int:
        """SMs of `device` as the driver counts them."""
        return import_kernel().device_info(device).num_sms

    @abstractmethod
    def granularity(self, device: int = 0) -> Granularity: ...

    @abstractmethod
    def create_pair(self, device: int, decode_sms: int, min_prefill_sms: int) -> RawPair:
        """Creates the streams of one menu entry. Raises PartitionError if short of SMs."""
