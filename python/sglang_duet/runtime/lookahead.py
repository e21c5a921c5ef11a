"""Look-ahead decode: k decode steps launched back to back, their results processed afterwards.

Each step's input is the previous step's sampled token, relayed on the device by SGLang's
FutureMap (keyed by request-pool index), so no CPU sync is needed between launches. A KV slot is
reserved per request and step before the step is launched. Results are then processed in step
order exactly as a step-by-step run would, so a request that finishes at step j (EOS, max tokens,
stop string) keeps exactly the same tokens; its surplus slots (steps j+1..k-1) are released and
its surplus tokens are dropped.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

import torch

logger = logging.getLogger(__name__)


def max_safe_lookahead(sched: Any, batch: Any, k: int) -> tuple[int, str]:
    """The look-ahead this batch can take (1 disables it) and why it was limited."""
    if k <= 1:
        return 1, "k=1"
    if sched.page_size != 1:
        return 1, "page_size > 1"
    if not batch.spec_algorithm.is_none():
        return 1, "speculative decoding"
    if batch.return_logprob or batch.return_hidden_states:
        return 1, "logprobs/hidden states need per-step processing"
    if batch.sampling_info.penalizer_orchestrator.is_required:
        return 1, "sampling penalties need per-step output counts"
    for req in batch.reqs:
        if req.grammar is not None or getattr(req, "return_sampling_mask", False):
            return 1, "constrained decoding needs per-step processing"
    # No more steps than the longest-running request can still use: a request that reaches its
    # max_new_tokens earlier finishes at its step and its surplus steps are discarded (process),
    # so the others keep producing tokens for the whole plan (the policy's gap bound needs it).
    room = max(_tokens_left(r) for r in batch.reqs)
    # ... and never past a request's row of the req-to-token table.
    width = batch.req_to_token_pool.req_to_token.shape[1]
    rows = min(width - len(r.origin_input_ids) - len(r.output_ids) for r in batch.reqs)
    k = max(1, min(k, room, rows))
    free = sched.token_to_kv_pool_allocator.available_size()
    fit = free // max(1, len(batch.reqs)) + 1  # step 0's slots are already allocated
    if fit < k:
        return max(1, fit), "KV pool nearly full"
    return k, ""


def _tokens_left(req: Any) -> int:
    left = req.sampling_params.max_new_tokens
    return 1 << 30 if left is None else left - len(req.output_ids)


@dataclass
class LookaheadLaunch:
    batch: Any
    results: list[Any]
    base_committed: list[int]  # kv_committed_len of each req at step 0


def launch(sched: Any, batch: Any, k: int) -> LookaheadLaunch:
    """Launch k decode steps of `batch` (already prepared for step 0 by update_running_batch)."""
    base = [r.kv_committed_len for r in batch.reqs]
    results = [sched.run_batch(batch)]
    for _ in range(1, k):
        batch.prepare_for_decode()  # reserves one more slot per request; input from FutureMap
        results.append(sched.run_batch(batch))
    return LookaheadLaunch(batch, results, base)


def process(sched: Any, la: LookaheadLaunch) -> int:
    """Process the k results in step order; returns the number of surplus tokens discarded."""
    batch, k = la.batch, len(la.results)
    if k == 1:
        sched.process_batch_result(batch, la.results[0])
        return 0
    final = [r.kv_committed_len for r in batch.reqs]
    pool = batch.req_to_token_pool.req_to_token
    # Slots of steps 1..k-1 per request, captured before a finishing request frees its row.
    reserved = [
        pool[r.req_pool_idx, b : f].to(torch.int64).clone()
        for r, b, f in zip(batch.reqs, la.base_committed, final, strict=True)
    ]
    normal = sched.batch_result_processor
    discarded = 0
    try:
        # SGLang's processor skips requests that already finished only in overlap mode; that
        # guard is what look-ahead needs for the steps after a request's last one.
        sched.batch_result_processor = _skipping_processor(normal)
        for step, result in enumerate(la.results):
            live = []
            for i, req in enumerate(batch.reqs):
                if req.finished():
                    continue
                # Present the request as a step-by-step run would have it at this step.
                req.kv_committed_len = la.base_committed[i] + step
                req.kv.kv_allocated_len = la.base_committed[i] + step
                live.append(i)
            sched.process_batch_result(batch, result)
            for i in live:
                req = batch.reqs[i]
                surplus = reserved[i][step:]
                if req.finished():
                    if surplus.numel():
                        sched.token_to_kv_pool_allocator.free(surplus)
                    discarded += k - 1 - step
                else:
                    req.kv_committed_len = final[i]
                    req.kv.kv_allocated_len = final[i]
    finally:
        sched.batch_result_processor = normal
    return discarded


_SKIPPING: dict[int, Any] = {}


def _skipping_processor(normal: Any) -> Any:
    key = id(normal)
    if key not in _SKIPPING:
        _SKIPPING.clear()
        _SKIPPING[key] = dataclasses.replace(normal, enable_overlap=True)
    return _SKIPPING[key]
