"""How many look-ahead steps a spatial decode may take, decided with the plan (CPU fakes)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from sglang_duet.runtime.lookahead import REASONS, Lookahead, max_safe_lookahead


def req(max_new=100, out=1, finished=False, grammar=None):
    return NS(
        sampling_params=NS(max_new_tokens=max_new), output_ids=[0] * out, grammar=grammar,
        finished=lambda: finished,
    )


def batch(reqs, logprob=False, penalties=False, spec=False):
    return NS(
        reqs=reqs, return_logprob=logprob, return_hidden_states=False,
        spec_algorithm=NS(is_none=lambda: not spec),
        sampling_info=NS(penalizer_orchestrator=NS(is_required=penalties)),
    )


def sched(backend="fa3", free=10_000, page_size=1, decode_backend=None):
    return NS(
        server_args=NS(attention_backend=backend, decode_attention_backend=decode_backend),
        page_size=page_size,
        token_to_kv_pool_allocator=NS(available_size=lambda: free),
    )


def test_unlimited():
    assert max_safe_lookahead(sched(), batch([req(), req()]), 4) == Lookahead(4, "")


@pytest.mark.parametrize(
    ("kwargs", "decode_backend"), [({"backend": "flashinfer"}, None), ({}, "flashinfer")]
)
def test_flashinfer_forces_one_step(kwargs, decode_backend):
    """FlashInfer plans every decode step into one pinned host buffer per wrapper: a second step
    launched before the first step's copy ran would overwrite its indices."""
    got = max_safe_lookahead(sched(decode_backend=decode_backend, **kwargs), batch([req()]), 4)
    assert got == Lookahead(1, "flashinfer") and "pinned host buffer" in REASONS[got.reason]


@pytest.mark.parametrize(
    ("s", "b", "reason"),
    [
        (sched(page_size=16), batch([req()]), "page_size"),
        (sched(), batch([req()], spec=True), "speculative"),
        (sched(), batch([req()], logprob=True), "logprobs"),
        (sched(), batch([req()], penalties=True), "penalties"),
        (sched(), batch([req(grammar=object())]), "constrained"),
    ],
)
def test_per_step_features_disable_it(s, b, reason):
    assert max_safe_lookahead(s, b, 4) == Lookahead(1, reason)


def test_room_counts_live_requests_only():
    """A request that already finished (still in the merged running batch) limits nothing."""
    b = batch([req(max_new=10, out=10, finished=True), req(max_new=10, out=7)])
    assert max_safe_lookahead(sched(), b, 4) == Lookahead(3, "")


def test_kv_room_before_the_prefill_and_step0_took_theirs():
    """Asked at decide time: 2 decodes, 100 free slots of which the plan's prefill takes 93 ->
    7 left for 2 requests x k steps, step 0 included -> k = 3."""
    b = batch([req(), req()])
    got = max_safe_lookahead(sched(free=100), b, 4, pending_tokens=93, step0_allocated=False)
    assert got == Lookahead(3, "kv_pool")
    # after update_running_batch (step 0 already allocated) the same pool allows one more
    assert max_safe_lookahead(sched(free=7), b, 4, step0_allocated=True).steps == 4
    assert max_safe_lookahead(sched(free=0), b, 4, pending_tokens=50, step0_allocated=False) == (
        Lookahead(1, "kv_pool")
    )


def test_no_live_decodes():
    assert max_safe_lookahead(sched(), batch([]), 4) == Lookahead(1, "")
