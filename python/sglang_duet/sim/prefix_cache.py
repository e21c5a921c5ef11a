"""Prefix-cache hits from a trace's block hashes (SGLang's radix cache, vLLM's automatic prefix
caching), one cache per replica.

Both systems keep the KV of finished prompts and reuse the longest cached prefix of a new
request: SGLang's radix cache is on unless ``--disable-radix-cache`` (`server_args.py`), vLLM V1
enables prefix caching by default (`EngineArgs._set_default_chunked_prefill_and_prefix_caching_
args`). Traces that carry ``hash_ids`` (Mooncake: one id per 512-token block; equal ids = equal
content and equal prefix) say which prompts share what, so:

* a request admitted to a replica looks up its blocks in order; the run of blocks already cached
  there is its hit, capped at ``prompt - 1`` tokens (both systems leave one token to compute);
  the request starts with ``computed = hit`` (`sglang_duet.policy.state`): the planner and the
  latency model then charge attention over the cached context and no work for those tokens;
* when its prompt is prefilled, its blocks become cached (most recently used, the head of the
  prompt most of all: the radix tree and vLLM's free-block queue evict a chain's tail first).

Capacity, simply: cached blocks live in the replica's free KV pages (a finished request's pages
are freed in the accounting but stay cached until needed), so at every lookup the least recently
used blocks are dropped until what remains fits the pages free at that moment. A hit's pages
are not shared in the page accounting: the request is charged pages for its whole prompt
(conservative on memory, like counting the cached copy once more).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

__all__ = ["BLOCK_TOKENS", "PrefixCache", "leading_blocks"]


def leading_blocks(hashes: Sequence[int], members) -> int:
    """How many leading blocks of ``hashes`` are in ``members`` (a cache, or the blocks an
    admission order has seen in one pass)."""
    n = 0
    for h in hashes:
        if h not in members:
            break
        n += 1
    return n

BLOCK_TOKENS = 512  # Mooncake's hash_ids granularity


class PrefixCache:
    """LRU set of cached block hashes of one replica."""

    __slots__ = ("block_tokens", "_lru", "hits", "lookups", "hit_tokens", "evicted")

    def __init__(self, block_tokens: int = BLOCK_TOKENS) -> None:
        if block_tokens < 1:
            raise ValueError("block_tokens must be >= 1")
        self.block_tokens = block_tokens
        self._lru: OrderedDict[int, None] = OrderedDict()
        self.hits = self.lookups = self.hit_tokens = self.evicted = 0

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, h: int) -> bool:
        return h in self._lru

    def fit(self, free_tokens: int) -> None:
        """Drop least recently used blocks until the cache fits in `free_tokens`."""
        keep = max(0, free_tokens) // self.block_tokens
        lru = self._lru
        while len(lru) > keep:
            lru.popitem(last=False)
            self.evicted += 1

    def lookup(self, hashes: Sequence[int], prompt_len: int, free_tokens: int) -> int:
        """Tokens of a `prompt_len`-token prompt already cached (the longest cached run of its
        leading blocks, at most ``prompt_len - 1``); touches the blocks it hits."""
        self.fit(free_tokens)
        self.lookups += 1
        lru = self._lru
        n = 0
        for h in hashes:
            if h not in lru:
                break
            n += 1
        for i in range(n - 1, -1, -1):  # the head ends most recent: tails are evicted first
            lru.move_to_end(hashes[i])
        hit = min(n * self.block_tokens, prompt_len - 1)
        if hit > 0:
            self.hits += 1
            self.hit_tokens += hit
        return max(hit, 0)

    def insert(self, hashes: Sequence[int]) -> None:
        """A prompt with these blocks has been prefilled: they are now the most recently used."""
        lru = self._lru
        for h in reversed(hashes):  # as a radix tree evicts leaves first, the tail goes first
            lru[h] = None
            lru.move_to_end(h)

    def peek(self, hashes: Sequence[int], prompt_len: int) -> int:
        """What `lookup` would return now, without touching or counting anything (an
        admission order reads it for every waiting request)."""
        return self.matched_tokens(self.cached_blocks(hashes), prompt_len)

    def matched_tokens(self, blocks: int, prompt_len: int) -> int:
        """The hit of ``blocks`` cached leading blocks: at most ``prompt - 1`` tokens."""
        return max(min(blocks * self.block_tokens, prompt_len - 1), 0)

    def cached_blocks(self, hashes: Sequence[int]) -> int:
        """How many leading blocks of ``hashes`` are cached now (no touch, no count)."""
        return leading_blocks(hashes, self._lru)

    @property
    def membership(self) -> tuple[int, int]:
        """Changes whenever the set of cached blocks does: blocks are only added (`insert`,
        which grows the set) and dropped (`fit`, which counts ``evicted``)."""
        return len(self._lru), self.evicted
