"""Translate SGLang's scheduler state into the policy's plain records (no decisions here)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from sglang_duet.policy import ReqState

from . import patches


def decode_state(req: Any) -> ReqState:
    """A running SGLang Req as the policy sees it: the whole prompt is in the KV cache."""
    prompt = len(req.origin_input_ids)
    out = len(req.output_ids)  # positional, no max(): called for every running request
    return ReqState(req.rid, prompt, prompt, out if out > 1 else 1,
                    req.sampling_params.max_new_tokens)


def waiting_state(req: Any) -> ReqState:
    """A waiting (or partly prefilled) Req. A retracted request re-prefills its outputs too, so
    its prompt is everything it has; prefix hits count as computed, capped at prompt - 1."""
    prompt = len(req.origin_input_ids) + len(req.output_ids)
    prefix = req.prefix_indices
    done = len(prefix) if prefix is not None else 0
    return ReqState(
        rid=req.rid,
        prompt_len=prompt,
        computed=min(done, prompt - 1),
        generated=0,
        max_new_tokens=req.sampling_params.max_new_tokens,
    )


# The clock of `arrival_s`: SGLang stamps a Req with time.perf_counter when its scheduler builds it
# (`Req.__init__` -> `SchedulerReqTimeStats.set_scheduler_recv_time`, sglang 0.5.17).
ARRIVAL_CLOCK = time.perf_counter


def arrival_s(req: Any) -> float:
    """When this scheduler received ``req`` (seconds, `ARRIVAL_CLOCK`): its
    ``time_stats.scheduler_recv_time``. That stamp survives retraction, which resets
    ``wait_queue_entry_time`` (`SchedulerReqTimeStats.set_wait_queue_entry_time`), so a retracted
    request keeps its first arrival's deadline; the queue-entry stamp only where the first is
    unset."""
    ts = req.time_stats
    return ts.scheduler_recv_time or ts.wait_queue_entry_time


def admission_candidates(queue: Sequence[Any]) -> list[tuple[float, int, int]]:
    """Each waiting Req as the admission order's candidate, ``(arrival_s, prompt_len, cached)``
    (`policy.admission.Candidate`'s fields): the prompt and cached tokens counted as
    `waiting_state` counts them (a retracted request re-prefills its outputs; the prefix match
    SGLang last made, which its ``calc_priority`` refreshes for cache-aware schedule policies and
    its prefill adder for the requests it reaches, else 0)."""
    out = []
    for r in queue:
        prompt = len(r.origin_input_ids) + len(r.output_ids)
        prefix = r.prefix_indices
        done = len(prefix) if prefix is not None else 0
        ts = r.time_stats  # `arrival_s`, inlined: read for every waiting request each iteration
        out.append((ts.scheduler_recv_time or ts.wait_queue_entry_time, prompt,
                    min(done, prompt - 1)))
    return out


def backlog(waiting: Sequence[ReqState], budget: int) -> bool:
    """Whether the waiting prompts hold more work than one iteration's prefill ``budget`` takes
    (the policy's ``backlog``: the simulator's "still queued after admission")."""
    return _beyond(waiting, budget)


def kv_held(waiting: Sequence[ReqState], free_tokens: int, budget: int, page_size: int,
            clip: int, chunked: bool = False) -> bool:
    """Whether the KV pool holds a waiting prompt back this iteration, as SGLang's prefill adder
    would find it (`PrefillAdder.add_one_req` returning NO_TOKEN): walking the queue while the
    iteration's prefill ``budget`` (tokens) lasts, each request charges its prompt tokens still
    to compute, its output reservation ``min(max_new_tokens - generated, clip)`` and one page
    (``page_size`` tokens), and is held back when that charge reaches what is ``free_tokens``
    left (`free_kv_tokens`). A request being chunked (``chunked``: the first of ``waiting``)
    already holds its pages and passes no such check. The policy's ``kv_held`` (the automatic
    backlog share, `policy/backlog.py`); the simulator's is its admission stopping at a request
    whose pages did not fit."""
    left, room = free_tokens, budget
    for i, r in enumerate(waiting):
        if room <= 0:
            return False
        room -= r.remaining_prompt
        if chunked and i == 0:
            continue
        out = min(max((r.max_new_tokens or 0) - r.generated, 0), clip)
        need = r.remaining_prompt + out + page_size
        if need >= left:
            return True
        left -= need
    return False


def _beyond(waiting: Sequence[ReqState], tokens: int) -> bool:
    left = tokens
    for r in waiting:
        left -= r.remaining_prompt
        if left < 0:
            return True
    return False


def free_kv_tokens(sched: Any, running: Sequence[Any],
                   slots: tuple[int, int] | None = None) -> int:
    """KV slots a waiting prompt could take now, as SGLang's prefill adder counts them
    (`PrefillAdder.rem_total_tokens`): the allocator's free slots plus the prefix cache's
    evictable ones (the full-attention pool's, where the pool is hybrid), less the reservation
    for the running requests' remaining output (``min(max_new_tokens - outputs,
    CLIP_MAX_NEW_TOKENS)`` each, times the scheduler's current new-token ratio, rounded up) and
    one token per running request, which a mixed iteration's decodes take (the adder's
    ``num_mixed_decode_tokens``; charged always, as the plan is not known yet). ``slots``: the
    iteration's `free_slots`, when the caller already read them."""
    free, evictable = slots if slots is not None else free_slots(sched)
    ratio, clip = float(sched.new_token_ratio_tracker.current), patches.clip_max_new_tokens()
    reserve = sum(min(r.sampling_params.max_new_tokens - len(r.output_ids), clip)
                  for r in running)
    return free + evictable - math.ceil(reserve * ratio) - len(running)


def kv_use(sched: Any, claimed: int = 0, slots: tuple[int, int] | None = None) -> float:
    """Share of the KV pool's slots that requests hold or have claimed (0-1; the policy's
    ``kv_use``): neither free nor evictable (cached prefixes no request holds), plus ``claimed``
    (`claimed_tokens`), of ``max_total_num_tokens`` (the full-attention pool's, where the pool is
    hybrid). ``slots``: as `free_kv_tokens`'s."""
    free, evictable = slots if slots is not None else free_slots(sched)
    total = int(sched.max_total_num_tokens)
    if total <= 0:
        return 1.0
    return min(1.0, max(0.0, 1.0 - (free + evictable - claimed) / total))


def claimed_tokens(waiting: Sequence[ReqState], budget: int) -> int:
    """Prompt tokens still to compute of the waiting requests that are admitted before
    ``budget`` (the policy's token budget) is used up. The first request (the one being chunked)
    is always counted, and each later one while the tokens counted before it stay under
    ``budget``. The simulator's replica admits prompts that way and allocates each admitted
    prompt's pages whole (`sim/replica.py` ``_admit``), so its ``kv_use`` counts a long prompt
    from admission. SGLang allocates a chunked prompt's slots one chunk at a time. Adding these
    tokens gives the automatic share (`policy/backlog.py`, whose thresholds were measured in the
    simulator) the same occupancy in both drivers."""
    total = 0
    for r in waiting:
        if total >= budget:
            break
        total += r.remaining_prompt
    return total


def free_slots(sched: Any) -> tuple[int, int]:
    """(free, evictable) KV slots: the allocator's and the prefix cache's, a sliding-window
    (hybrid) pool's full-attention part; read once per iteration (`free_kv_tokens`, `kv_use`)."""
    alloc, cache = sched.token_to_kv_pool_allocator, sched.tree_cache
    if hasattr(alloc, "full_available_size"):
        return int(alloc.full_available_size()), int(cache.full_evictable_size())
    return int(alloc.available_size()), int(cache.evictable_size())


class PolicyInputs(NamedTuple):
    """What `DuetPolicy.plan` takes: the running decodes and the waiting prompts, in order."""

    decodes: list[ReqState]
    waiting: list[ReqState]


def policy_inputs(running: Sequence[Any], waiting: Iterable[Any], chunked: Any | None,
                  tokens: int | None = None) -> PolicyInputs:
    """(decodes, waiting) in the order SGLang's prefill adder visits them: the request whose
    prompt is being chunked first, then the waiting queue in its (already prioritised) order.
    ``tokens``: the waiting queue is translated only until its prompts hold more than this
    many tokens still to compute (give the policy's token budget: the plan, `backlog`,
    `kv_held` and `claimed_tokens` read nothing beyond; a queue of 256 would otherwise cost a
    record each every iteration); None: all of it."""
    decodes = [decode_state(r) for r in running if not r.finished()]
    queue = [waiting_state(chunked)] if chunked is not None else []
    if tokens is None:
        queue.extend(waiting_state(r) for r in waiting if r is not chunked)
        return PolicyInputs(decodes, queue)
    left = tokens - sum(r.remaining_prompt for r in queue)
    for r in waiting:
        if left < 0:
            break
        if r is not chunked:
            state = waiting_state(r)
            queue.append(state)
            left -= state.remaining_prompt
    return PolicyInputs(decodes, queue)
