"""Thin Python wrappers over the C ABI; they convert status codes into exceptions.

Streams are returned as integers (raw CUstream handles). Wrap them with
`torch.cuda.ExternalStream(handle, device=...)`; they stay valid until the owning object
(`GreenPair`, or `stream_destroy`) releases them.
"""

from __future__ import annotations

import ctypes
from typing import NamedTuple

from ._lib import GreenPairStruct, lib
from .errors import raise_for

# Flag of cuDevSmResourceSplitByCount: finer groups, at the cost of large thread clusters.
SPLIT_IGNORE_SM_COSCHEDULING = 0x1

_GRANULARITY_SOURCES = {1: "driver", 2: "probe", 3: "table"}


def _check(code: int) -> None:
    if code != 0:
        raise_for(code, lib().sgld_last_error().decode(errors="replace"))


def _int_out() -> ctypes.c_int:
    return ctypes.c_int(0)


class DeviceInfo(NamedTuple):
    cc: tuple[int, int]
    num_sms: int


class Granularity(NamedTuple):
    """Green-context split granularity of one device, in SMs.

    A decode group can hold `min_sms`, `min_sms + align_sms`, ... SMs. `source` is "driver"
    (reported by a CUDA 13 driver and confirmed by trial splits), "probe" (measured with trial
    splits) or "table" (NVIDIA's per-architecture guideline).
    """

    min_sms: int
    align_sms: int
    total_sms: int
    source: str


def open_driver() -> None:
    """Opens libcuda.so.1 and runs cuInit; raises DriverUnavailable with the reason."""
    _check(lib().sgld_driver_open())


def driver_version() -> int:
    """CUDA version of the running driver, e.g. 12040 for 12.4."""
    out = _int_out()
    _check(lib().sgld_driver_version(ctypes.byref(out)))
    return out.value


def device_count() -> int:
    out = _int_out()
    _check(lib().sgld_device_count(ctypes.byref(out)))
    return out.value


def device_info(dev: int = 0) -> DeviceInfo:
    major, minor, sms = _int_out(), _int_out(), _int_out()
    _check(lib().sgld_device_info(dev, ctypes.byref(major), ctypes.byref(minor), ctypes.byref(sms)))
    return DeviceInfo((major.value, minor.value), sms.value)


def green_granularity(dev: int = 0, flags: int = 0) -> Granularity:
    """Split granularity for green contexts on `dev` (driver >= 12.4)."""
    mn, al, tot, src = _int_out(), _int_out(), _int_out(), _int_out()
    _check(
        lib().sgld_green_granularity(
            dev, flags, ctypes.byref(mn), ctypes.byref(al), ctypes.byref(tot), ctypes.byref(src)
        )
    )
    return Granularity(mn.value, al.value, tot.value, _GRANULARITY_SOURCES.get(src.value, "?"))


class GreenPair:
    """A disjoint (decode, prefill) green-context partition made by ONE split.

    `decode_stream` runs only on the decode group's `decode_sms` SMs and `prefill_stream` only
    on the other `prefill_sms` SMs. Call `close()` (or use as a context manager) to destroy both
    green contexts; the streams are invalid afterwards.
    """

    def __init__(self, dev: int, decode_sms: int, min_prefill_sms: int = 1, flags: int = 0):
        self.device = dev
        self._pair = GreenPairStruct()
        _check(
            lib().sgld_green_pair_create(
                dev, decode_sms, min_prefill_sms, flags, ctypes.byref(self._pair)
            )
        )

    @property
    def decode_stream(self) -> int:
        return int(self._pair.decode_stream or 0)

    @property
    def prefill_stream(self) -> int:
        return int(self._pair.prefill_stream or 0)

    @property
    def decode_sms(self) -> int:
        return self._pair.decode_sms

    @property
    def prefill_sms(self) -> int:
        return self._pair.prefill_sms

    def close(self) -> None:
        if self._pair.priv:
            _check(lib().sgld_green_pair_destroy(ctypes.byref(self._pair)))

    def __enter__(self) -> GreenPair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        sizes = f"decode={self.decode_sms}, prefill={self.prefill_sms}"
        return f"GreenPair(device={self.device}, {sizes})"


def stream_create(dev: int = 0) -> int:
    """New non-blocking stream in the primary context of `dev` (the one PyTorch uses)."""
    out = ctypes.c_void_p()
    _check(lib().sgld_stream_create(dev, ctypes.byref(out)))
    return int(out.value or 0)


def stream_destroy(dev: int, stream: int) -> None:
    _check(lib().sgld_stream_destroy(dev, stream))


def stream_synchronize(stream: int) -> None:
    _check(lib().sgld_stream_synchronize(stream))


def smctrl_open(path: str | None = None) -> None:
    """Loads libsmctrl from `path` (None: "libsmctrl.so" on the search path)."""
    _check(lib().sgld_smctrl_open(path.encode() if path else None))


def smctrl_has_ext() -> bool:
    """True if the loaded libsmctrl has the 128-bit stream-mask setter."""
    return bool(lib().sgld_smctrl_has_ext())


def smctrl_set_stream_mask(stream: int, lo: int, hi: int = 0) -> None:
    """Sets the TPC mask (hi << 64 | lo) of `stream`. A SET bit DISABLES that TPC."""
    _check(lib().sgld_smctrl_set_stream_mask(stream, lo, hi))


def smid_available() -> bool:
    """True if the %smid probe kernel was compiled in."""
    return bool(lib().sgld_smid_available())


def smid_record(
    stream: int, out_ptr: int, nblocks: int, spin_ns: int = 100_000, smem_bytes: int = 48 * 1024
) -> None:
    """Asynchronously writes each block's SM id to int32 device buffer `out_ptr[nblocks]`."""
    _check(lib().sgld_smid_record(stream, out_ptr, nblocks, spin_ns, smem_bytes))


def smid_record_graph(
    capture_stream: int,
    launch_stream: int,
    out_ptr: int,
    nblocks: int,
    spin_ns: int = 100_000,
    smem_bytes: int = 48 * 1024,
) -> None:
    """Captures `smid_record` into a graph on `capture_stream`, replays it on `launch_stream`."""
    _check(
        lib().sgld_smid_record_graph(
            capture_stream, launch_stream, out_ptr, nblocks, spin_ns, smem_bytes
        )
    )
