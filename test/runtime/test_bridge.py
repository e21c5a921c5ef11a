"""SGLang Req -> policy ReqState translation (fake requests; no server)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sglang_duet.policy import ReqState
from sglang_duet.runtime.bridge import decode_state, policy_inputs, waiting_state


def req(rid, prompt, out=0, prefix=None, finished=False, max_new=16):
    return SimpleNamespace(
        rid=rid, origin_input_ids=list(range(prompt)), output_ids=list(range(out)),
        prefix_indices=None if prefix is None else list(range(prefix)),
        sampling_params=SimpleNamespace(max_new_tokens=max_new), finished=lambda: finished,
    )


def test_decode_state_counts_whole_prompt_and_outputs():
    assert decode_state(req("a", 10, out=3)) == ReqState("a", 10, 10, 3, 16)


def test_waiting_state_uses_prefix_capped_below_prompt():
    assert waiting_state(req("w", 10, prefix=4)).computed == 4
    assert waiting_state(req("w", 10, prefix=10)).computed == 9  # always one token to compute
    assert waiting_state(req("w", 10)).computed == 0


def test_retracted_request_reprefills_its_outputs():
    s = waiting_state(req("r", 10, out=5, prefix=0))
    assert (s.prompt_len, s.generated) == (15, 0)


def test_policy_inputs_order_chunked_first_and_skip_finished():
    running = [req("d1", 5, out=2), req("done", 5, out=2, finished=True)]
    chunked = req("c", 300, prefix=128)
    waiting = [req("w1", 20), chunked, req("w2", 30)]
    decodes, queue = policy_inputs(running, waiting, chunked)
    assert [d.rid for d in decodes] == ["d1"]
    assert [w.rid for w in queue] == ["c", "w1", "w2"]
    assert queue[0].computed == 128


@pytest.mark.parametrize("budget", [1, 19, 20, 21, 50, 172, 300, 10_000])
def test_policy_inputs_up_to_the_token_budget_read_the_same(budget):
    """The queue translated only until it holds more than the budget's tokens gives every
    reader what the whole queue gives (#48: 256 waiting requests each iteration)."""
    from sglang_duet.policy.batching import chunk_waiting
    from sglang_duet.runtime.bridge import backlog, claimed_tokens, kv_held

    chunked = req("c", 300, prefix=128)  # 172 tokens left
    waiting = [chunked] + [req(f"w{i}", 20 + 10 * i, prefix=5 * (i % 2)) for i in range(12)]
    whole = policy_inputs([], waiting, chunked).waiting
    cut = policy_inputs([], waiting, chunked, budget).waiting
    assert cut == whole[:len(cut)]
    assert len(cut) < len(whole) or budget == 10_000  # all 13 hold 1,042 tokens
    for b in range(0, budget + 1, max(1, budget // 7)):
        assert backlog(cut, b) == backlog(whole, b)
        assert claimed_tokens(cut, b) == claimed_tokens(whole, b)
        assert chunk_waiting(cut, b) == chunk_waiting(whole, b)
        for free in (10, 200, 700, 5000):
            assert kv_held(cut, free, b, 1, 4096, True) == kv_held(whole, free, b, 1, 4096, True)


def test_backlog_is_prompt_work_beyond_one_iteration():
    from sglang_duet.policy import ReqState
    from sglang_duet.runtime.bridge import backlog

    w = [ReqState("a", 100, 40, 0), ReqState("b", 50, 0, 0)]  # 60 + 50 prompt tokens left
    assert not backlog(w, 110) and backlog(w, 109) and not backlog([], 0)


def test_kv_held_charges_each_waiting_request_as_sglangs_prefill_adder():
    """Prompt left + clipped output reservation + one page, held once that reaches what is left;
    only the requests one iteration's budget reaches; the chunked request passes."""
    from sglang_duet.policy import ReqState
    from sglang_duet.runtime.bridge import kv_held

    w = [ReqState("a", 100, 40, 0), ReqState("b", 50, 0, 0)]  # 60 + 50 prompt tokens left
    big = 10**6
    assert not kv_held(w, 113, big, 1, 4096)  # 61, then 51 < 52 left
    assert kv_held(w, 112, big, 1, 4096)  # 51 >= 51 left
    assert kv_held(w, 61, big, 1, 4096) and not kv_held([], 0, big, 1, 4096)
    assert not kv_held(w, 70, 60, 1, 4096)  # the budget ends at "a": "b" is not tried
    assert not kv_held(w, 52, big, 1, 4096, chunked=True)  # "a" holds its pages already
    assert kv_held(w, 51, big, 1, 4096, chunked=True)
    c = [ReqState("c", 10, 0, 0, max_new_tokens=1000)]  # 10 + min(1000, 100) + 16
    assert kv_held(c, 126, big, 16, 100) and not kv_held(c, 127, big, 16, 100)


def test_free_kv_tokens_counts_as_sglangs_prefill_adder():
    """Free plus evictable slots (a hybrid pool's full part) less each running request's
    remaining output, clipped, times the new-token ratio, rounded up, and one mixed-decode
    token per running request."""
    from types import SimpleNamespace as NS

    from sglang_duet.runtime import patches
    from sglang_duet.runtime.bridge import free_kv_tokens

    def sched(evictable, alloc=None, cache=None):
        return NS(token_to_kv_pool_allocator=alloc or NS(available_size=lambda: 1000),
                  tree_cache=cache or NS(evictable_size=lambda: evictable),
                  new_token_ratio_tracker=NS(current=0.5))

    def running(max_new, out):
        return NS(sampling_params=NS(max_new_tokens=max_new), output_ids=[0] * out)

    assert free_kv_tokens(sched(28), []) == 1028
    hybrid = sched(0, NS(available_size=lambda: 1000, full_available_size=lambda: 700),
                   NS(evictable_size=lambda: 28, full_evictable_size=lambda: 5))
    assert free_kv_tokens(hybrid, []) == 705
    assert free_kv_tokens(sched(0), [running(101, 1), running(41, 1)]) == 1000 - 70 - 2
    assert free_kv_tokens(sched(0), [running(4, 1)]) == 1000 - 2 - 1  # ceil(3 x 0.5)
    clip = patches.clip_max_new_tokens()
    assert free_kv_tokens(sched(0), [running(10 * clip, 0)]) == 1000 - -(-clip // 2) - 1


def test_kv_use_is_the_share_of_slots_neither_free_nor_evictable():
    from types import SimpleNamespace as NS

    from sglang_duet.runtime.bridge import kv_use

    def sched(free, evictable, total, full=None):
        alloc = NS(available_size=lambda: free)
        cache = NS(evictable_size=lambda: evictable)
        if full is not None:  # a hybrid pool: its full-attention part counts
            alloc.full_available_size, cache.full_evictable_size = (lambda: full[0]), (
                lambda: full[1])
        return NS(token_to_kv_pool_allocator=alloc, tree_cache=cache, max_total_num_tokens=total)

    assert kv_use(sched(1000, 0, 1000)) == 0.0
    assert kv_use(sched(600, 150, 1000)) == 0.25
    assert kv_use(sched(0, 0, 1000)) == 1.0
    assert kv_use(sched(1000, 0, 1000, full=(100, 100))) == 0.8
    assert kv_use(sched(0, 0, 0)) == 1.0  # no pool at all counts as full
    assert kv_use(sched(600, 150, 1000), claimed=250) == 0.5  # claimed slots count as held
    assert kv_use(sched(600, 0, 1000), claimed=900) == 1.0  # clipped at full


def test_claimed_tokens_count_the_prompts_admitted_before_the_budget_is_used_up():
    """As the simulator's admission: the first (chunked) prompt always, each later one while the
    tokens before it stay under the budget; computed tokens are not claimed again."""
    from sglang_duet.runtime.bridge import claimed_tokens

    def w(prompt, computed=0):
        return ReqState(f"w{prompt}", prompt, computed, 0)

    assert claimed_tokens([], 8192) == 0
    assert claimed_tokens([w(100_000, 16_384), w(500)], 8192) == 83_616  # the long one alone
    assert claimed_tokens([w(3000), w(5000), w(4000), w(700)], 8192) == 12_000
    assert claimed_tokens([w(3000), w(5192), w(700)], 8192) == 8192


def test_the_runtime_occupancy_equals_the_simulators_with_long_prompts_in_flight():
    """The policy sees the same kv_use from both drivers: in the simulator's replica (which
    allocates an admitted prompt's pages whole), ``KvCache.use`` equals what the runtime reports
    from the slots written so far plus ``claimed_tokens`` of the admitted prompts, up to one
    page per prompt in flight."""
    import numpy as np
    from sim_helpers import make_workload

    from sglang_duet.runtime.bridge import claimed_tokens
    from sglang_duet.sim import SimConfig, Simulation
    from sglang_duet.sim.kvcache import pages_for

    n = 6
    w = make_workload(np.linspace(0.0, 0.5, n), [30_000, 600, 20_000, 900, 12_000, 400], [32] * n)
    sim = Simulation(SimConfig(policy="duet", gpus=1), w)
    rep = sim.replicas[0]
    plan, checked = rep.planner.plan, []

    def record(decodes, waiting, backlog=False, kv_held=False, kv_use=0.0):
        page, total = rep.kv.page_size, rep.kv.num_pages * rep.kv.page_size
        unwritten = sum(r.pages - pages_for(r.computed, page) for r in rep.prefilling)
        written = (rep.kv.used - unwritten) * page
        runtime = (written + claimed_tokens(waiting, rep.planner.token_budget)) / total
        assert abs(runtime - kv_use) <= (len(waiting) + 1) * page / total
        checked.append(bool(waiting))
        return plan(decodes, waiting, backlog, kv_held, kv_use)

    rep.planner.plan = record
    sim.run()
    assert sum(checked) > 5  # plans with long prompts in flight were compared
