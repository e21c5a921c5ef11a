"""Paged KV-cache accounting of one replica (16-token pages, no prefix sharing).

Capacity comes from the GPU: ``mem_fraction * HBM - weights - activation reserve`` divided by the
bytes of one page (``page_size * kv_bytes_per_token``), as SGLang sizes its token pool from
``mem_fraction_static``. Only page counts are tracked; which physical page holds what is
irrelevant to timing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["Flavor", "KvCache", "KvSizing", "kv_steps", "pages_for", "preemption_victim",
           "size_kv_cache"]

PAGE_SIZE = 16


def pages_for(tokens: int, page_size: int = PAGE_SIZE) -> int:
    return -(-tokens // page_size)


def kv_steps(ctx: np.ndarray, pages: np.ndarray, free: int, page: int, m_cap: int) -> int:
    """Most decode steps (<= m_cap, >= 1) that requests holding `pages` pages, with cached
    contexts `ctx`, can run before their page growth exceeds `free` pages (binary search)."""

    def need(j: int) -> int:
        return int(np.maximum(-(-(ctx + j) // page) - pages, 0).sum())

    if need(m_cap) <= free:
        return m_cap
    lo, hi = 1, m_cap  # need(lo) <= free (made room), need(hi) > free
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if need(mid) <= free:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class KvSizing:
    """How a replica's KV pool was sized (all bytes are per GPU)."""

    hbm_bytes: int
    mem_fraction: float
    weight_bytes: int
    reserve_bytes: int
    kv_bytes_per_token: int
    page_size: int
    num_pages: int

    @property
    def capacity_tokens(self) -> int:
        return self.num_pages * self.page_size

    def to_dict(self) -> dict[str, object]:
        return {
            "hbm_gb": self.hbm_bytes / 1e9,
            "mem_fraction": self.mem_fraction,
            "weights_gb": round(self.weight_bytes / 1e9, 3),
            "activation_reserve_gb": round(self.reserve_bytes / 1e9, 3),
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "page_size": self.page_size,
            "num_pages": self.num_pages,
            "capacity_tokens": self.capacity_tokens,
        }


def size_kv_cache(
    hbm_bytes: int,
    weight_bytes: int,
    kv_bytes_per_token: int,
    mem_fraction: float = 0.88,
    reserve_bytes: int = 2 * 10**9,
    page_size: int = PAGE_SIZE,
    max_tokens: int | None = None,
) -> KvSizing:
    """Pages that fit; ValueError (a one-line reason) when the weights leave no room.
    `max_tokens` caps the pool like SGLang's `--max-total-tokens` (0.5.17
    `mem_cache/kv_cache_configurator.py`, `_apply_token_constraints`: ``min(profiled, cap)``)."""
    free = int(hbm_bytes * mem_fraction) - weight_bytes - reserve_bytes
    num_pages = free // (kv_bytes_per_token * page_size) if free > 0 else 0
    if max_tokens is not None and num_pages > 0:
        num_pages = min(num_pages, max_tokens // page_size)
    if num_pages < 1:
        raise ValueError(
            f"model does not fit: {weight_bytes / 1e9:.1f} GB of weights + "
            f"{reserve_bytes / 1e9:.1f} GB reserve > {mem_fraction:.2f} x "
            f"{hbm_bytes / 1e9:.0f} GB of GPU memory"
        )
    return KvSizing(hbm_bytes, mem_fraction, weight_bytes, reserve_bytes, kv_bytes_per_token,
                    page_size, int(num_pages))


class KvCache:
    """Free/used page counters with strict checks (allocation never over-commits)."""

    __slots__ = ("num_pages", "free", "page_size", "peak_used")

    def __init__(self, num_pages: int, page_size: int = PAGE_SIZE) -> None:
        self.num_pages = num_pages
        self.free = num_pages
        self.page_size = page_size
        self.peak_used = 0

    @property
    def used(self) -> int:
        return self.num_pages - self.free

    @property
    def use(self) -> float:
        """Share of the pages requests hold (0-1; an empty pool counts as full): the policy's
        ``kv_use``. An admitted prompt holds its whole prompt's pages from admission (the
        runtime adds them as claimed: `runtime/bridge.claimed_tokens`)."""
        return (self.num_pages - self.free) / self.num_pages if self.num_pages else 1.0

    def alloc(self, pages: int) -> None:
        if pages > self.free:
            raise RuntimeError(f"KV over-commit: {pages} pages requested, {self.free} free")
        self.free -= pages
        used = self.num_pages - self.free
        if used > self.peak_used:
            self.peak_used = used

    def release(self, pages: int) -> None:
        self.free += pages
        if self.free > self.num_pages:
            raise RuntimeError("KV double free")

    def grow_to(self, req_pages: int, tokens: int) -> int:
        """Pages to add so ``tokens`` fit a request now holding ``req_pages`` (0 if they do)."""
        need = -(-tokens // self.page_size) - req_pages
        return need if need > 0 else 0


@dataclass(frozen=True)
class Flavor:
    """Memory behaviour of the serving system a replica imitates.

    ``retract_to_back``: where a preempted request re-enters the waiting queue. SGLang 0.5.17's
    default ``--schedule-policy fcfs`` keeps the queue in arrival order (`SchedulePolicy.
    calc_priority` returns without sorting) and appends a retracted request at its back
    (`Scheduler._add_request_to_queue`, from `update_running_batch`); vLLM V1 puts it at the
    front (`Scheduler.schedule`: ``self.waiting.prepend_request(preempted_req)``)."""

    name: Literal["sglang", "vllm"] = "sglang"
    reserve_init: float = 0.7
    reserve_min: float = 0.1
    reserve_decay_steps: int = 600
    retract_to_back: bool = False

    @classmethod
    def of(cls, name: str, sglang_schedule: bool = True) -> Flavor:
        """`sglang_schedule`: SGLang's retract-to-back order (False: front, as before)."""
        if name == "vllm":
            return cls("vllm", 0.0, 0.0, 1)
        return cls("sglang", retract_to_back=sglang_schedule)


def preemption_victim(flavor: Flavor, running: list, prefilling: list):
    """The request a replica of ``flavor`` preempts first when pages run out: vLLM the running
    request admitted last; SGLang the one with the fewest output tokens (the latest admitted
    among equals); with nothing running, the last prefilling request; None when there is none.
    """
    if running:
        if flavor.name == "vllm":
            return max(running, key=lambda r: r.admit_seq)
        return min(running, key=lambda r: (r.generated, -r.admit_seq))
    return prefilling[-1] if prefilling else None
