"""Translate SGLang's scheduler state into the policy's plain records (no decisions here)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from sglang_duet.policy import ReqState


def decode_state(req: Any) -> ReqState:
    """A running SGLang Req as the policy sees it: the whole prompt is in the KV cache."""
    prompt = len(req.origin_input_ids)
    return ReqState(
        rid=req.rid,
        prompt_len=prompt,
        computed=prompt,
        generated=max(1, len(req.output_ids)),
        max_new_tokens=req.sampling_params.max_new_tokens,
    )


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


def backlog(waiting: Sequence[ReqState], budget: int) -> bool:
    """Whether the waiting prompts hold more work than one iteration's prefill ``budget`` takes
    (the policy's ``backlog``: the simulator's "still queued after admission")."""
    left = budget
    for r in waiting:
        left -= r.remaining_prompt
        if left < 0:
            return True
    return False


class PolicyInputs(NamedTuple):
    """What `DuetPolicy.plan` takes: the running decodes and the waiting prompts, in order."""

    decodes: list[ReqState]
    waiting: list[ReqState]


def policy_inputs(running: Sequence[Any], waiting: Iterable[Any], chunked: Any | None
                  ) -> PolicyInputs:
    """(decodes, waiting) in the order SGLang's prefill adder visits them: the request whose
    prompt is being chunked first, then the waiting queue in its (already prioritised) order."""
    decodes = [decode_state(r) for r in running if not r.finished()]
    queue = [waiting_state(chunked)] if chunked is not None else []
    queue.extend(waiting_state(r) for r in waiting if r is not chunked)
    return PolicyInputs(decodes, queue)
