"""Backend `none`: no partitioning; the scheduler runs everything on one stream."""

from __future__ import annotations

from .base import PartitionBackend, PartitionError, RawPair
from .sizes import Granularity


class NoneBackend(PartitionBackend):
    """Always available. Its menu is empty, so the policy never plans a spatial split."""

    name = "none"
    partitions = False

    def available(self, device: int = 0) -> tuple[bool, str]:
        return True, "no partitioning: one stream on the whole GPU (always available)"

    def num_sms(self, device: int = 0) -> int:
        try:
            return super().num_sms(device)
        except Exception:  # no driver or GPU: the count is unknown
            return 0

    def granularity(self, device: int = 0) -> Granularity:
        raise PartitionError("backend 'none' makes no partitions")

    def create_pair(self, device: int, decode_sms: int, min_prefill_sms: int) -> RawPair:
        raise PartitionError("backend 'none' makes no partitions")
