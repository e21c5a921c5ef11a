"""Backend `libsmctrl`: per-stream TPC masks through a libsmctrl the user installed.

Nothing of libsmctrl ships with this project. It is loaded at run time from
SGLANG_DUET_LIBSMCTRL or `libsmctrl.so` on the library search path. libsmctrl writes the mask
into a private field of the driver's stream object at an offset it knows per driver release, so
the running driver must be one it supports (x86_64: CUDA 8.0 - 12.8 in the releases we know of).
libsmctrl's own MASK_OFF (an explicit offset) accepts any driver. SGLANG_DUET_LIBSMCTRL_ANY_DRIVER=1
accepts unlisted drivers and machines only up to 12.8: above it the offset is unknown and a write
there corrupts driver memory, so it is refused without MASK_OFF.
"""

from __future__ import annotations

import platform

from . import env
from .base import PartitionBackend, PartitionError, RawPair, import_kernel, kernel_and_driver
from .masks import MASK_BITS, pair_masks, sms_to_tpcs, split_u128
from .sizes import Granularity, tpc_granularity

# Driver CUDA versions (cuDriverGetVersion) with a known stream-mask offset, per machine type.
SUPPORTED_DRIVERS: dict[str, tuple[int, int]] = {
    "x86_64": (8000, 12080),
    "aarch64": (8000, 12080),
}
SMS_PER_TPC = 2


def driver_supported(version: int, machine: str | None = None) -> tuple[bool, str]:
    """Whether libsmctrl's stream masks are known to work on driver CUDA `version`."""
    machine = machine or platform.machine()
    span = SUPPORTED_DRIVERS.get(machine)
    ver = f"{version // 1000}.{version % 1000 // 10}"
    if env.libsmctrl_mask_off():
        return True, f"driver CUDA {ver} accepted with the explicit {env.LIBSMCTRL_MASK_OFF}"
    newest = max(hi for _, hi in SUPPORTED_DRIVERS.values())
    if env.libsmctrl_any_driver():
        if version > newest:
            return False, (
                f"driver is CUDA {ver}, newer than any libsmctrl offset we know "
                f"({newest // 1000}.{newest % 1000 // 10}); {env.LIBSMCTRL_ANY_DRIVER} is "
                f"refused there (the mask would be written at an unknown offset): give the "
                f"offset with {env.LIBSMCTRL_MASK_OFF}"
            )
        return True, f"driver CUDA {ver} accepted by override"
    if span is None:
        return False, f"libsmctrl stream masks are not known to work on {machine}"
    lo, hi = span
    if not lo <= version <= hi:
        return False, (
            f"driver is CUDA {ver}; libsmctrl stream masks are known for CUDA "
            f"{lo // 1000}.{lo % 1000 // 10} - {hi // 1000}.{hi % 1000 // 10} on {machine} "
            f"(above that only with an explicit {env.LIBSMCTRL_MASK_OFF}; "
            f"{env.LIBSMCTRL_ANY_DRIVER}=1 accepts other drivers up to the newest known)"
        )
    return True, f"driver CUDA {ver} is supported"


class LibsmctrlBackend(PartitionBackend):
    """Two primary-context streams per menu entry, masked once at creation.

    Decode is allowed TPCs [0, S_d / 2), prefill every TPC above. Counts are nominal: on Hopper
    the bits are physical TPC ids, so floor-swept TPCs can make a side smaller than asked.
    """

    name = "libsmctrl"

    def available(self, device: int = 0) -> tuple[bool, str]:
        k, version = kernel_and_driver()
        if k is None:
            return False, str(version)
        ok, why = driver_supported(version)
        if not ok:
            return False, why
        try:
            count = k.device_count()
            if device >= count:
                return False, f"device {device} does not exist ({count} CUDA devices)"
            sms = k.device_info(device).num_sms
        except k.KernelError as exc:
            return False, f"device query failed: {exc}"
        path = env.libsmctrl_path()
        try:
            k.smctrl_open(path)
        except k.LibsmctrlUnavailable as exc:
            return False, f"libsmctrl not found ({exc}); install it and set {env.LIBSMCTRL_PATH}"
        tpcs = sms // SMS_PER_TPC
        if tpcs > 64 and not k.smctrl_has_ext():
            return False, f"{tpcs} TPCs need libsmctrl_set_stream_mask_ext, which it lacks"
        if tpcs > MASK_BITS:
            return False, f"{tpcs} TPCs exceed the {MASK_BITS}-bit mask"
        return True, f"libsmctrl from {path or 'libsmctrl.so'}; {why}; {tpcs} TPCs"

    def granularity(self, device: int = 0) -> Granularity:
        return tpc_granularity(SMS_PER_TPC)

    def create_pair(self, device: int, decode_sms: int, min_prefill_sms: int) -> RawPair:
        k = import_kernel()
        total = self.num_sms(device)
        decode_tpcs = sms_to_tpcs(decode_sms, SMS_PER_TPC)
        prefill_sms = total - decode_sms
        if decode_sms <= 0 or prefill_sms < max(min_prefill_sms, 1):
            raise PartitionError(
                f"libsmctrl: decode {decode_sms} SMs leaves {prefill_sms} of {total} for "
                f"prefill, asked >= {min_prefill_sms}"
            )
        streams: list[int] = []
        try:
            for mask in pair_masks(decode_tpcs):
                streams.append(k.stream_create(device))
                k.smctrl_set_stream_mask(streams[-1], *split_u128(mask))
        except (k.KernelError, ValueError) as exc:
            for s in streams:
                k.stream_destroy(device, s)
            raise PartitionError(f"libsmctrl: {exc}") from exc

        def close() -> None:
            for s in streams:
                k.stream_destroy(device, s)
            streams.clear()

        return RawPair(streams[0], streams[1], decode_sms, prefill_sms, close)
