"""SGLang's ``--schedule-policy`` orders for the simulated SGLang-based systems.

Each order follows `SchedulePolicy.calc_priority` (``sglang/srt/managers/schedule_policy.py``):
SGLang sorts its waiting queue in place before every prefill admission, so the order a policy
leaves persists into the next pass (new arrivals appended at the back); the simulator keeps the
returned list as the replica's queue, which is the same.

SGLang 0.5.17 (the version our baselines run):

* ``lpm``: longest cached prefix first (`_sort_by_longest_prefix`), the match counted as
  `match_prefix_for_req` does (``num_matched_prefix_tokens``: at most ``prompt - 1``), here
  against the replica's `PrefixCache` (`PrefixCache.peek`). In-batch prefix caching
  (`_compute_prefix_matches`): a request whose cached match is at most
  ``IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD`` (32) tokens is matched against the requests
  already seen in this pass (those not held back); sharing at least
  ``IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD`` (32) tokens with one of them sends it to
  the back, so only one of a group sharing an uncached prefix goes first and the rest reuse its
  KV. The simulator knows content only as 512-token block hashes: a shared prefix shorter than a
  block is invisible to it.
* ``dfs-weight``: `_sort_by_dfs_weight`. Each request hangs at the radix-tree node where its
  cached match ends (``last_node``); a node weighs the waiting requests at it and below it
  (`_calc_weight`); a depth-first walk from the root visits heavier children first and emits a
  node's own requests after its subtree (`_get_dfs_priority`). The tree here is the trie of the
  requests' cached hash chains (a Mooncake hash names a block and everything before it). SGLang
  breaks equal weights by the order the children were inserted into the tree; the simulator,
  which keeps no tree, by first appearance in the queue.
* ``lof``: longest ``max_new_tokens`` first (`_sort_by_longest_output`), our replays' output
  length.
* The fallback (`_determine_active_policy`): above 128 waiting requests ``lpm`` skips matching
  and sorting and leaves the queue as it is. In 0.5.17 that covers ``lpm`` only: ``dfs-weight``
  sorts whatever the queue length.
* With the radix cache disabled (``--disable-radix-cache``; ``SimConfig.prefix_cache`` False)
  ``lpm`` and ``dfs-weight`` become ``fcfs`` (`_validate_and_adjust_policy`).

After 0.5.17 (sgl-project/sglang PR #32911; read in the same file at upstream commit
00550cd11b35), kept as a reference row:

* ``hrrn``: highest response ratio next with token aging (`_sort_by_hrrn`). The scheduler counts
  the prompt tokens it launches for prefill (each batch's ``extend_num_tokens``, added in
  `Scheduler.run_batch`; `Replica.prefill_tokens`), and a request records the count when it
  enters the waiting queue (`Scheduler._add_request_to_queue`, which a retraction's requeue
  goes through too; ``Request.queued_tokens``); its ratio is ``(count now - count at entry) /
  uncached prompt tokens`` (`_uncached_len`: prompt minus the cached match), the waited work
  standing in for waited time over service time. Highest ratio first; nothing left to prefill
  goes first; requests held back by the in-batch rule above go last; ties by request id, a
  random uuid in SGLang (here a fixed scramble of the request index). It is cache-aware
  upstream: the same 128-request fallback (which upstream covers ``lpm`` and ``hrrn``) and the
  same fcfs without a radix cache.

What the simulator does not follow: SGLang's match also refreshes the matched nodes' access
time (so waiting requests' prefixes are evicted last); `PrefixCache.peek` does not touch.

Cost: an order runs before every admission with up to hundreds waiting. Cached-block counts are
kept per request until the cache's membership changes (`PrefixCache.membership`), and ``lpm``,
``dfs-weight`` and ``lof`` return the queue untouched when it and the cache are what they were
after the previous pass (each of them, applied to its own output, gives it back).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .config import SimConfig
from .prefix_cache import leading_blocks
from .request import Request

if TYPE_CHECKING:
    from .replica import Replica

# one replica's admission order: (its queue, now in seconds, the replica) -> the queue reordered
QueueOrder = Callable[[Iterable[Request], float, "Replica"], list[Request]]

__all__ = ["AFTER_0_5_17", "CACHE_AWARE_QUEUE_LIMIT", "ORDERS", "IN_BATCH_CHECK_TOKENS",
           "IN_BATCH_DEPRIORITIZE_TOKENS"]

IN_BATCH_CHECK_TOKENS = 32  # IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD (schedule_policy.py)
IN_BATCH_DEPRIORITIZE_TOKENS = 32  # IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD
CACHE_AWARE_QUEUE_LIMIT = 128  # `_determine_active_policy`: more waiting -> no sort
AFTER_0_5_17 = frozenset({"hrrn"})  # orders not in SGLang 0.5.17 (reference rows only)
_INF = float("inf")


class _Matches:
    """Cached leading blocks per waiting request, valid while the cache's membership holds."""

    __slots__ = ("blocks", "sig")

    def __init__(self) -> None:
        self.blocks: dict[Request, int] = {}
        self.sig: tuple[int, int] | None = None

    def refresh(self, cache) -> bool:
        """Forget the counts if the cache changed; True when it had not."""
        sig = cache.membership
        if sig == self.sig:
            return True
        self.sig = sig
        self.blocks.clear()
        return False

    def of(self, r: Request, cache) -> int:
        n = self.blocks.get(r)
        if n is None:
            n = self.blocks[r] = cache.cached_blocks(r.hashes)
        return n


def _held_back(r: Request, n: int, bt: int, seen: set[int]) -> bool:
    """`_compute_prefix_matches`' in-batch rule for ``r`` (``n`` cached blocks): True if it
    shares enough of an uncached prefix with a request seen earlier in this pass; otherwise a
    request with little cached joins the seen ones."""
    if min(n * bt, r.prompt_len) > IN_BATCH_CHECK_TOKENS:
        return False
    if min(leading_blocks(r.hashes, seen) * bt, r.prompt_len) >= IN_BATCH_DEPRIORITIZE_TOKENS:
        return True
    seen.update(r.hashes)
    return False


def _lpm(cfg: SimConfig) -> QueueOrder | None:
    """`SchedulePolicy._sort_by_longest_prefix` (module docstring)."""
    if not cfg.prefix_cache:
        return None
    memo, last = _Matches(), [None]

    def order(queue: Iterable[Request], now: float, rep: Replica) -> list[Request]:
        reqs = list(queue)
        cache = rep.prefix
        if cache is None or len(reqs) > CACHE_AWARE_QUEUE_LIMIT:
            return reqs
        if memo.refresh(cache) and reqs == last[0]:
            return reqs
        bt, seen, keys = cache.block_tokens, set(), []
        for r in reqs:
            if not r.hashes:
                keys.append(0.0)
                continue
            n = memo.of(r, cache)
            if _held_back(r, n, bt, seen):
                keys.append(_INF)
            else:
                keys.append(-cache.matched_tokens(n, r.base))
        out = [reqs[i] for i in sorted(range(len(reqs)), key=keys.__getitem__)]
        last[0] = out
        return out

    return order


def _dfs_weight(cfg: SimConfig) -> QueueOrder | None:
    """`SchedulePolicy._sort_by_dfs_weight` over the trie of cached hash chains."""
    if not cfg.prefix_cache:
        return None
    memo, last = _Matches(), [None]

    def order(queue: Iterable[Request], now: float, rep: Replica) -> list[Request]:
        reqs = list(queue)
        cache = rep.prefix
        if cache is None:
            return reqs
        if memo.refresh(cache) and reqs == last[0]:
            return reqs
        root: object = None
        weight: dict[object, int] = {}
        children: dict[object, list[object]] = {root: []}
        at: dict[object, list[Request]] = {root: []}
        for r in reqs:
            n = memo.of(r, cache) if r.hashes else 0
            parent = root
            for j in range(n):
                node = r.hashes[j]
                if node in weight:
                    weight[node] += 1
                else:
                    weight[node] = 1
                    children[parent].append(node)
                    children[node] = []
                    at[node] = []
                parent = node
            at[parent].append(r)
        out: list[Request] = []
        stack: list[tuple[object, bool]] = [(root, False)]
        while stack:  # post-order: a node's subtree (heaviest child first), then its own
            node, expanded = stack.pop()
            if expanded:
                out.extend(at[node])
                continue
            stack.append((node, True))
            kids = sorted(children[node], key=lambda c: -weight[c])  # stable: first seen
            stack.extend((c, False) for c in reversed(kids))
        last[0] = out
        return out

    return order


def _lof(cfg: SimConfig) -> QueueOrder | None:
    """`SchedulePolicy._sort_by_longest_output`: max_new_tokens = the replay's output length."""

    last: list[list[Request] | None] = [None]

    def order(queue: Iterable[Request], now: float, rep: Replica) -> list[Request]:
        reqs = list(queue)
        if reqs != last[0]:
            reqs.sort(key=lambda r: -r.output_len)
            last[0] = reqs
        return reqs

    return order


def _scramble(idx: int) -> int:
    """A fixed stand-in for SGLang's random uuid request ids (hrrn's tie-break)."""
    return (idx * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF


def _hrrn(cfg: SimConfig) -> QueueOrder | None:
    """`SchedulePolicy._sort_by_hrrn` (after 0.5.17, PR #32911; module docstring)."""
    if not cfg.prefix_cache:
        return None
    memo = _Matches()

    def order(queue: Iterable[Request], now: float, rep: Replica) -> list[Request]:
        reqs = list(queue)
        if len(reqs) > CACHE_AWARE_QUEUE_LIMIT:
            return reqs
        cache = rep.prefix
        if cache is not None:
            memo.refresh(cache)
        clock = rep.prefill_tokens
        bt, seen, keys = (cache.block_tokens if cache is not None else 0), set(), []
        for r in reqs:
            tie = _scramble(r.idx)
            hit = 0
            if cache is not None and r.hashes:
                n = memo.of(r, cache)
                if _held_back(r, n, bt, seen):
                    keys.append((_INF, tie))
                    continue
                hit = max(min(n * bt, r.base - 1), 0)
            uncached = r.prompt_len - hit
            if uncached <= 0:
                keys.append((-_INF, tie))
            else:
                keys.append((-max(0, clock - r.queued_tokens) / uncached, tie))
        return [reqs[i] for i in sorted(range(len(reqs)), key=keys.__getitem__)]

    return order


# name -> factory(cfg) -> QueueOrder | None, registered into `schedule.SGLANG_ORDERS`
ORDERS: dict[str, Callable[[SimConfig], QueueOrder | None]] = {
    "lpm": _lpm,
    "dfs-weight": _dfs_weight,
    "lof": _lof,
    "hrrn": _hrrn,
}
