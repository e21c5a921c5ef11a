"""Prefix-cache hits from hash_ids (sim/prefix_cache.py) and their effect on a simulation."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import pred, run

from sglang_duet.sim import Workload, build_arrivals, load_trace
from sglang_duet.sim.prefix_cache import PrefixCache

REL = 1e-9


def test_lookup_is_the_leading_run_capped_at_prompt_minus_one():
    pc = PrefixCache(512)
    assert pc.lookup([1, 2, 3], 1500, 10**6) == 0
    pc.insert([1, 2, 3])
    assert pc.lookup([1, 2, 9], 1500, 10**6) == 1024
    assert pc.lookup([9, 2, 3], 1500, 10**6) == 0  # not a prefix
    assert pc.lookup([1, 2, 3], 1500, 10**6) == 1499  # whole prompt cached: one token left
    assert pc.hits == 2 and pc.lookups == 4 and pc.hit_tokens == 1024 + 1499


def test_eviction_fits_the_free_pages_and_drops_tails_first():
    pc = PrefixCache(512)
    pc.insert([1, 2, 3])
    pc.insert([7, 8])
    pc.fit(3 * 512)  # room for 3 blocks: the oldest prompt's tail goes first
    assert 1 in pc and 7 in pc and 8 in pc and 3 not in pc and 2 not in pc
    assert pc.lookup([1, 2], 2000, 3 * 512) == 512
    assert pc.lookup([1], 600, 0) == 0 and len(pc) == 0  # no free pages: nothing stays


def _two_same_prompts(hashes: bool) -> Workload:
    ids = [[11, 12], [11, 12]] if hashes else None
    return Workload(np.array([0.0, 1.0]), np.array([1000, 1000]), np.array([1, 1]), "t", ids)


def test_a_hit_charges_attention_over_the_cached_context_only():
    w = _two_same_prompts(True)
    res, _ = run(w, "sglang-chunked", gpus=1, frontend=False)
    a, b = res.requests
    assert a.first_token_s == pytest.approx(pred([1000], [0]), rel=REL)
    # B's 1000-token prompt is cached but for its last token: one token over 999 cached
    assert b.first_token_s - b.arrival_s == pytest.approx(pred([1], [999]), rel=REL)
    res_off, _ = run(w, "sglang-chunked", gpus=1, frontend=False, prefix_cache=False)
    b_off = res_off.requests[1]
    assert b_off.first_token_s - b_off.arrival_s == pytest.approx(pred([1000], [0]), rel=REL)


def test_no_hashes_no_hits():
    res, _ = run(_two_same_prompts(False), "sglang-chunked", gpus=1, frontend=False)
    b = res.requests[1]
    assert b.first_token_s - b.arrival_s == pytest.approx(pred([1000], [0]), rel=REL)


def test_mooncake_hash_ids_reach_the_workload():
    tr = load_trace("mooncake")
    assert tr.hash_ids is not None and len(tr.hash_ids) == len(tr)
    assert all(len(h) == -(-n // 512) for h, n in zip(tr.hash_ids[:200], tr.input_len[:200],
                                                      strict=True))
    w = build_arrivals(tr, 5.0, 50, 0)
    assert w.hash_ids is not None and len(w.hash_ids) == 50
    assert build_arrivals(load_trace("azure-code"), 5.0, 20, 0).hash_ids is None
