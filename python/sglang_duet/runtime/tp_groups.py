"""Keeping the TP ranks of one scheduler in step (TP > 1).

Every rank must run the same plan, the same look-ahead and the same phase state, or a
collective inside a forward (or a capture barrier) waits for a rank that never arrives:

* the plan and its look-ahead are decided on the first rank and broadcast together
  (`broadcast_from_first`);
* the start-up choices that shape later collectives (partition backend, captured decode sizes)
  are compared across ranks before any capture: a fallback on one rank only fails start-up on
  all of them, with the ranks' answers in the message (`require_same`);
* the prefill phase's second communicator (`patches.request_prefill_tp_group`) makes its first
  collective at start-up (`warm_up_prefill_group`): NCCL connects lazily, and that first
  connection would otherwise happen during a spatial iteration, next to decode all-reduces.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from sglang_duet.runtime import patches

logger = logging.getLogger(__name__)


class RanksDisagree(RuntimeError):
    """Start-up choices differ between TP ranks; raised on every rank."""


def broadcast_from_first(obj: Any, group: Any, src: int) -> Any:
    """`obj` as TP rank `src` has it (over the CPU group `group`)."""
    import torch

    box = [obj]
    torch.distributed.broadcast_object_list(box, src=src, group=group)
    return box[0]


def gather(obj: Any, group: Any) -> list[Any]:
    """`obj` of every rank of the CPU group `group`, in rank order."""
    import torch

    out: list[Any] = [None] * torch.distributed.get_world_size(group)
    torch.distributed.all_gather_object(out, obj, group=group)
    return out


def require_same(per_rank: Sequence[Any], what: str) -> None:
    """Raises RanksDisagree (the same message on every rank) unless all ranks agree."""
    if any(x != per_rank[0] for x in per_rank[1:]):
        listing = "; ".join(f"rank {i}: {x}" for i, x in enumerate(per_rank))
        raise RanksDisagree(
            f"TP ranks disagree on {what} ({listing}); start-up stops on every rank rather "
            "than hang a later collective. Give --duet-partition-backend explicitly, or check "
            "the log of the rank that fell back."
        )


def warm_up_prefill_group(device: Any) -> float:
    """One all-reduce on the prefill phase's communicator; returns its seconds."""
    import torch
    from sglang.srt.distributed.parallel_state import get_tp_group

    t0 = time.perf_counter()
    with patches.prefill_tp_group(True):
        get_tp_group().all_reduce(torch.zeros(1, device=device))
    torch.cuda.synchronize(device)
    seconds = time.perf_counter() - t0
    logger.info("duet: prefill TP communicator warmed up in %.2fs", seconds)
    return seconds
