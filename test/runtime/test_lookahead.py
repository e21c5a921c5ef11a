"""max_safe_lookahead without a server: which look-ahead a decode batch may take, and why not."""

from __future__ import annotations

from types import SimpleNamespace as NS

import torch

from sglang_duet.runtime.lookahead import max_safe_lookahead


def _req(prompt: int, out: int, max_new: int | None, grammar=None):
    return NS(origin_input_ids=[0] * prompt, output_ids=[0] * out, grammar=grammar,
              sampling_params=NS(max_new_tokens=max_new))


def _batch(reqs, width=4096, logprob=False, penalties=False, spec=False):
    return NS(reqs=reqs, spec_algorithm=NS(is_none=lambda: not spec), return_logprob=logprob,
              return_hidden_states=False,
              sampling_info=NS(penalizer_orchestrator=NS(is_required=penalties)),
              req_to_token_pool=NS(req_to_token=torch.zeros(1, width, dtype=torch.int32)))


def _sched(free=10_000, page=1):
    return NS(page_size=page,
              token_to_kv_pool_allocator=NS(available_size=lambda: free))


def test_longest_request_sets_the_cap_not_the_shortest():
    # one request has 1 token left: the other still gets all 6 steps (the first finishes at
    # its step and its surplus is discarded)
    reqs = [_req(10, 4, 5), _req(10, 2, 100)]
    assert max_safe_lookahead(_sched(), _batch(reqs), 6) == (6, "")
    assert max_safe_lookahead(_sched(), _batch([_req(10, 4, 7)]), 6) == (3, "")


def test_row_width_and_kv_pool_cap_it():
    assert max_safe_lookahead(_sched(), _batch([_req(90, 5, 100)], width=100), 8)[0] == 5
    k, why = max_safe_lookahead(_sched(free=5), _batch([_req(10, 1, 100)] * 2), 8)
    assert (k, why) == (3, "KV pool nearly full")


def test_features_that_need_per_step_processing_force_k1():
    one = [_req(10, 1, 100)]
    assert max_safe_lookahead(_sched(page=16), _batch(one), 4) == (1, "page_size > 1")
    assert max_safe_lookahead(_sched(), _batch(one, logprob=True), 4)[0] == 1
    assert max_safe_lookahead(_sched(), _batch(one, penalties=True), 4)[1].startswith(
        "sampling penalties")
    assert max_safe_lookahead(_sched(), _batch([_req(10, 1, 100, grammar=object())]), 4)[0] == 1
