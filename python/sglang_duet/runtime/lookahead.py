"""Look-ahead decode: k decode steps launched one after the other (a spatial iteration launches
its prefill after step 0: `launch_first`, then `launch_rest`), their results processed
afterwards.

Each step's input is the previous step's sampled token, relayed on the device by SGLang's
FutureMap (keyed by request-pool index), so no CPU sync is needed between launches. A KV slot is
reserved per request and step before the step is launched. Results are then processed in step
order exactly as a step-by-step run would, so a request that finishes at step j (EOS, max tokens,
stop string) keeps exactly the same tokens; its surplus slots (steps j+1..k-1) are released and
its surplus tokens are dropped.

Delivery is per step: `launch` can mark each step's end (an event on the decode stream), and
`process` waits for step j's mark only before it processes, and so streams, step j. Clients then
get a token every decode step (t_d), not k tokens at the end of the iteration (k * t_d), which is
what the policy's gap bound and the simulator assume. Without marks (CPU, or a driver that
refuses cross-context events: `phases.PhaseRunners.host_join`) the caller waits for the whole
decode stream first, and tokens arrive at the iteration's end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
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
    # No more steps than the longest-running request can still use: one that reaches its
    # max_new_tokens earlier finishes at its step and its surplus steps are discarded (process),
    # so the others keep producing tokens for the whole plan (the policy's gap bound needs it).
    room = max(_tokens_left(r) for r in reqs)
    k = max(1, min(k, room, _row_room(batch, reqs)))
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


def _tokens_left(req: Any) -> int:
    left = req.sampling_params.max_new_tokens
    return 1 << 30 if left is None else left - len(req.output_ids)


def _row_room(batch: Any, reqs: list[Any]) -> int:
    """Steps left before a request's row of the req-to-token table ends (its context)."""
    pool = getattr(batch, "req_to_token_pool", None)
    if pool is None:
        return 1 << 30
    width = pool.req_to_token.shape[1]
    return min(width - len(r.origin_input_ids) - len(r.output_ids) for r in reqs)


@dataclass
class LookaheadLaunch:
    batch: Any
    results: list[Any]
    base_committed: list[int]  # kv_committed_len of each req at step 0
    slots: list[Any]  # out_cache_loc of steps 1..k-1: one KV slot per request, batch order
    marks: list[Any]  # per step: its end on the decode stream (an event), or None


def launch(sched: Any, batch: Any, k: int, mark: Callable[[], Any] | None = None
           ) -> LookaheadLaunch:
    """Launch k decode steps of `batch` (already prepared for step 0 by update_running_batch).
    ``mark()``: called after each step's launch, on the decode stream; what it returns (an
    event, or None) is what `process` waits for before that step."""
    la = launch_first(sched, batch, mark)
    launch_rest(sched, la, k, mark)
    return la


def launch_first(sched: Any, batch: Any, mark: Callable[[], Any] | None = None
                 ) -> LookaheadLaunch:
    """Launch step 0 only. A spatial iteration launches its prefill next and then the other
    steps (`launch_rest`): each step is a whole host-side ``run_batch`` (inputs, graph replay,
    sampling), so the prefill's partition would otherwise idle for k steps' host time."""
    base = [r.kv_committed_len for r in batch.reqs]
    results = [sched.run_batch(batch)]
    return LookaheadLaunch(batch, results, base, [], [mark() if mark is not None else None])


def launch_rest(sched: Any, la: LookaheadLaunch, k: int,
                mark: Callable[[], Any] | None = None) -> None:
    """Launch steps 1..k-1 after `launch_first`'s step 0 (appended to `la`)."""
    batch = la.batch
    for _ in range(len(la.results), k):
        batch.prepare_for_decode()  # reserves one more slot per request; input from FutureMap
        la.slots.append(batch.out_cache_loc)
        la.results.append(sched.run_batch(batch))
        la.marks.append(mark() if mark is not None else None)


def process(sched: Any, la: LookaheadLaunch, wait: Callable[[Any], None] | None = None) -> int:
    """Process the k results in step order, each after ``wait(mark)`` of its step (the current
    stream waits for that step only); returns the number of surplus tokens discarded."""
    batch, k = la.batch, len(la.results)
    wait = wait or _no_wait
    if k == 1:
        wait(la.marks[0])
        sched.process_batch_result(batch, la.results[0])
        return 0
    final = [r.kv_committed_len for r in batch.reqs]
    ended: list[tuple[int, int]] = []  # (request index, step it finished at)
    discarded = 0
    with patches.results_skip_finished(sched):
        for step, result in enumerate(la.results):
            wait(la.marks[step])
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
                if req.finished():
                    ended.append((i, step))
                    discarded += k - 1 - step
                else:
                    req.kv_committed_len = final[i]
                    req.kv.kv_allocated_len = final[i]
    if ended:
        # Surplus slots (steps j+1..k-1) go back only now: the slot tensors may come from
        # allocator work queued on the decode stream before the last step, which the last
        # wait covers (earlier ones need not). No allocation happens in between.
        reserved = torch.stack([s.to(torch.int64) for s in la.slots], dim=1)
        for i, step in ended:
            if step < k - 1:
                sched.token_to_kv_pool_allocator.free(reserved[i, step:])
    return discarded


def _no_wait(mark: Any) -> None:
    """`process` without marks: the caller joined the decode stream already."""
