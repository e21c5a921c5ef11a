"""Backend `green-ctx`: CUDA green contexts (driver >= 12.4, Hopper and newer)."""

from __future__ import annotations

from .base import PartitionBackend, PartitionError, RawPair, import_kernel, kernel_and_driver
from .sizes import Granularity

MIN_DRIVER = 12040
MIN_CC = (9, 0)


def _version(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


class GreenCtxBackend(PartitionBackend):
    """One green context + stream per side; each menu entry comes from ONE resource split.

    `flags` are cuDevSmResourceSplitByCount flags (e.g. SPLIT_IGNORE_SM_COSCHEDULING).
    """

    name = "green-ctx"

    def __init__(self, flags: int = 0) -> None:
        self.flags = flags

    def available(self, device: int = 0) -> tuple[bool, str]:
        k, version = kernel_and_driver()
        if k is None:
            return False, str(version)
        if version < MIN_DRIVER:
            return False, f"driver is CUDA {_version(version)}; green contexts need >= 12.4"
        try:
            count = k.device_count()
            if device >= count:
                return False, f"device {device} does not exist ({count} CUDA devices)"
            info = k.device_info(device)
            if info.cc < MIN_CC:
                return False, (
                    f"GPU is sm_{info.cc[0]}{info.cc[1]}; green-ctx is enabled for sm_90+ "
                    "(Hopper and newer) only"
                )
            gran = k.green_granularity(device, self.flags)
        except (k.KernelError, ValueError) as exc:
            return False, f"green-context query failed: {exc}"
        return True, (
            f"CUDA {_version(version)} driver, sm_{info.cc[0]}{info.cc[1]} with {info.num_sms} "
            f"SMs, split granularity min {gran.min_sms} / step {gran.align_sms} ({gran.source})"
        )

    def granularity(self, device: int = 0) -> Granularity:
        g = import_kernel().green_granularity(device, self.flags)
        return Granularity(g.min_sms, g.align_sms, g.source)

    def create_pair(self, device: int, decode_sms: int, min_prefill_sms: int) -> RawPair:
        k = import_kernel()
        try:
            pair = k.GreenPair(device, decode_sms, min_prefill_sms, self.flags)
        except k.GrantError as exc:
            raise PartitionError(f"green-ctx: {exc}") from exc
        except k.KernelError as exc:
            msg = f"green-ctx: creating a {decode_sms}-SM split failed: {exc}"
            raise PartitionError(msg) from exc
        return RawPair(
            pair.decode_stream, pair.prefill_stream, pair.decode_sms, pair.prefill_sms, pair.close
        )
