"""Batch formation exactly as plain chunked prefill does it (Sarathi / vLLM / SGLang mixed chunk).

``form_chunked_batch`` is the aggregated mode of the policy *and* the batch former of the
simulator's ``vllm-chunked`` / ``sglang-chunked`` baselines, so both run the same rule:

1. every running decode contributes one token (all of them, even beyond the budget);
2. waiting requests, in FIFO order, take the remaining budget ``token_budget - len(decodes)``;
   a request that does not fit whole is chunked to what is left;
3. formation stops as soon as the budget is exhausted.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..latency import Batch
from .state import PrefillChunk, ReqState


def chunk_waiting(
    waiting: Sequence[ReqState], token_budget: int
) -> tuple[tuple[PrefillChunk, ...], tuple[bool, ...]]:
    """FIFO chunks of the waiting requests' remaining prompts, at most ``token_budget`` tokens
    in all, and for each chunk whether it completes its prompt (samples a token)."""
    chunks: list[PrefillChunk] = []
    completes: list[bool] = []
    budget = token_budget
    for req in waiting:
        if budget <= 0:
            break
        remaining = req.prompt_len - req.computed
        if remaining <= 0:
            continue
        length = remaining if remaining < budget else budget
        chunks.append(PrefillChunk(req.rid, req.computed, length))
        completes.append(length == remaining)
        budget -= length
    return tuple(chunks), tuple(completes)


def form_prefill_chunks(waiting: Sequence[ReqState], token_budget: int) -> tuple[PrefillChunk, ...]:
    """FIFO chunks of the waiting requests' remaining prompts, at most ``token_budget`` tokens."""
    return chunk_waiting(waiting, token_budget)[0]


def form_chunked_batch(
    decodes: Sequence[ReqState], waiting: Sequence[ReqState], token_budget: int
) -> tuple[tuple[str, ...], tuple[PrefillChunk, ...]]:
    """Plain chunked-prefill batch: ``(decode rids, prefill chunks)``."""
    rids = tuple(r.rid for r in decodes)
    return rids, form_prefill_chunks(waiting, token_budget - len(rids))


def chunk_batch(prefix: Sequence[PrefillChunk], chunks: Sequence[PrefillChunk] | None = None,
                completes: Sequence[bool] = ()) -> Batch:
    """The prefill batch of ``prefix``, a FIFO prefix of ``chunks`` whose ``completes`` flags
    say which chunks finish their prompts (sample a token); a prefix's shortened last chunk no
    longer does. ``chunks=None``: ``prefix`` is the whole of them."""
    flags = list(completes) if chunks is None else _prefix_flags(prefix, chunks, completes)
    return Batch.few([p.length for p in prefix], [p.start for p in prefix], flags)


def chunk_rows(prefix: Sequence[PrefillChunk], chunks: Sequence[PrefillChunk],
               completes: Sequence[bool]) -> tuple[list[int], list[int], int]:
    """`chunk_batch` as lists (q, c, sampling rows), for `LatencyModel.predict_with_rows`."""
    return ([p.length for p in prefix], [p.start for p in prefix],
            sum(_prefix_flags(prefix, chunks, completes)))


def _prefix_flags(prefix: Sequence[PrefillChunk], chunks: Sequence[PrefillChunk],
                  completes: Sequence[bool]) -> list[bool]:
    return [completes[j] and (p is chunks[j] or p == chunks[j]) for j, p in enumerate(prefix)]


def truncate_chunks(chunks: Sequence[PrefillChunk], max_tokens: int) -> tuple[PrefillChunk, ...]:
    """Keep the FIFO prefix of ``chunks`` holding at most ``max_tokens`` tokens (the last kept
    chunk is cut short when needed). Used to shrink the prefill side of a spatial plan."""
    out: list[PrefillChunk] = []
    left = max_tokens
    for ch in chunks:
        if left <= 0:
            break
        if ch.length <= left:
            out.append(ch)
            left -= ch.length
        else:
            out.append(PrefillChunk(ch.rid, ch.start, left))
            left = 0
    return tuple(out)
