"""Look-ahead decode: k decode steps launched back to back, their results processed afterwards.

Each step's input is the previous step's sampled token, relayed on the device by SGLang's
FutureMap (keyed by request-pool index), so no CPU sync is needed between launches. A KV slot is
reserved per request and step before the step is launched. Results are then processed in step
order exactly as a step-by-step run would, so a request that finishes at step j (EOS, max tokens,
stop string) keeps exactly the same tokens; its surplus slots (steps j+1..k-1) are released and
its surplus tokens are dropped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from sglang_duet.runtime import patches

logger = logging.getLogger(__name__)


# Decode attention backends whose per-step plan writes a host buffer that the previous step's
# asynchronous copy may still read: SGLang's FlashInfer backend plans each decode step into one
# pinned host buffer per wrapper (`call_begin_forward`), so look-ahead would overwrite a step's
# indices while its copy is queued (wrong tokens or an illegal access). FA3 and triton replay
# with device-to-device copies only.
HOST_PLANNED_BACKENDS = ("flashinfer",)


class Lookahead(NamedTuple):
    """Decode steps a spatial iteration runs, and why fewer than the plan's ("" = not limited).

    `reason` is a short key (a metrics label); the log line spells it out."""

    steps: int
    reason: str = ""


def decode_attention_backend(server_args: Any) -> str:
    """The attention backend SGLang's decode forward uses (its decode override, else the one)."""
    return str(
        getattr(server_args, "decode_attention_backend", None)
        or getattr(server_args, "attention_backend", None)
        or ""
    )


def max_safe_lookahead(
    sched: Any, batch: Any, k: int, pending_tokens: int = 0, step0_allocated: bool = True
) -> Lookahead:
    """The look-ahead this batch can take (1 disables it) and why it was limited.

    The scheduler asks when it decides the plan (so that TP rank 0's answer travels with the
    plan), i.e. before the plan's prefill (`pending_tokens` KV slots) and the decode's step 0
    (`step0_allocated=False`) have taken their slots from the pool.
    """
    reqs = [r for r in batch.reqs if not r.finished()]
    if k <= 1 or not reqs:
        return Lookahead(1)
    if decode_attention_backend(sched.server_args) in HOST_PLANNED_BACKENDS:
        return Lookahead(1, "flashinfer")
    if sched.page_size != 1:
        return Lookahead(1, "page_size")
    if not batch.spec_algorithm.is_none():
        return Lookahead(1, "speculative")
    if batch.return_logprob or batch.return_hidden_states:
        return Lookahead(1, "logprobs")
    if batch.sampling_info.penalizer_orchestrator.is_required:
        return Lookahead(1, "penalties")
    for req in reqs:
        if req.grammar is not None or getattr(req, "return_sampling_mask", False):
            return Lookahead(1, "constrained")
    # Never take more steps than any request can still use (each extra step is a token).
    room = min(r.sampling_params.max_new_tokens - len(r.output_ids) for r in reqs)
    k = max(1, min(k, room))
    free = sched.token_to_kv_pool_allocator.available_size() - pending_tokens
    fit = max(0, free) // len(reqs) + (1 if step0_allocated else 0)
    if fit < k:
        return Lookahead(max(1, fit), "kv_pool")
    return Lookahead(k)


REASONS = {
    "flashinfer": "FlashInfer decode plans reuse one pinned host buffer per step",
    "page_size": "page_size > 1",
    "speculative": "speculative decoding",
    "logprobs": "logprobs/hidden states need per-step processing",
    "penalties": "sampling penalties need per-step output counts",
    "constrained": "constrained decoding needs per-step processing",
    "kv_pool": "KV pool nearly full",
}


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
    discarded = 0
    with patches.results_skip_finished(sched):
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
    return discarded

