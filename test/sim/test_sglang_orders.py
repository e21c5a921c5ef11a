"""SGLang's --schedule-policy orders in the simulator (sim/sglang_orders.py), on hand-made
queues, and one short mooncake run with lpm."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sglang_duet.sim.arrivals import build_arrivals
from sglang_duet.sim.config import SimConfig
from sglang_duet.sim.engine import Simulation
from sglang_duet.sim.prefix_cache import PrefixCache
from sglang_duet.sim.request import Request
from sglang_duet.sim.schedule import SGLANG_ORDERS
from sglang_duet.sim.sglang_orders import CACHE_AWARE_QUEUE_LIMIT
from sglang_duet.sim.traces import load_trace

BT = 512


def req(idx: int, hashes: list[int] | None, prompt: int | None = None, out: int = 10,
        queued: int = 0) -> Request:
    n = prompt if prompt is not None else BT * len(hashes or [1])
    r = Request(idx, float(idx), n, out)
    r.hashes = hashes
    r.queued_tokens = queued
    return r


def replica(cached: list[int] = (), prefill_tokens: int = 0, prefix: bool = True):
    cache = PrefixCache(BT) if prefix else None
    if cache is not None:
        cache.insert(list(cached))
    return SimpleNamespace(prefix=cache, prefill_tokens=prefill_tokens)


def order(name: str, **cfg):
    o = SGLANG_ORDERS[name](SimConfig(**cfg))
    assert o is not None
    return o


def idx(reqs: list[Request]) -> list[int]:
    return [r.idx for r in reqs]


def test_every_name_is_registered_and_fcfs_needs_no_hook():
    assert set(SGLANG_ORDERS) == {"fcfs", "lpm", "dfs-weight", "lof", "hrrn"}
    assert SGLANG_ORDERS["fcfs"](SimConfig()) is None
    SimConfig(schedule_policy="hrrn").validate()


def test_lpm_puts_the_longest_cached_prefix_first():
    rep = replica(cached=[1, 2, 3, 10])
    q = [req(0, [7, 8]), req(1, [1, 2, 5]), req(2, [10, 11]), req(3, [1, 2, 3, 4])]
    assert idx(order("lpm")(q, 0.0, rep)) == [3, 1, 2, 0]


def test_lpm_match_is_capped_at_prompt_minus_one():
    rep = replica(cached=[1, 2])
    # both fully cached; 0's prompt (1024) caps at 1023, 1's (1100 tokens, 2 blocks cached) not
    q = [req(0, [1, 2], prompt=1024), req(1, [1, 2, 9], prompt=1100)]
    assert idx(order("lpm")(q, 0.0, rep)) == [1, 0]


def test_lpm_in_batch_rule_holds_back_requests_sharing_an_uncached_prefix():
    rep = replica(cached=[50])
    # 0 and 2 share the uncached block 1: 2 goes to the back; 3 (own prefix) stays
    q = [req(0, [1, 2]), req(1, [50, 51]), req(2, [1, 3]), req(3, [4])]
    assert idx(order("lpm")(q, 0.0, rep)) == [1, 0, 3, 2]


def test_lpm_falls_back_above_128_waiting():
    rep = replica(cached=[1])
    n = CACHE_AWARE_QUEUE_LIMIT
    q = [req(i, [100 + i]) for i in range(n - 1)] + [req(n - 1, [1, 2])]
    assert idx(order("lpm")(q, 0.0, rep))[0] == n - 1  # 128 waiting: sorted
    q.append(req(n, [200]))
    assert idx(order("lpm")(q, 0.0, rep)) == list(range(n + 1))  # 129: left as it is


def test_lpm_and_dfs_weight_are_fcfs_without_a_radix_cache():
    assert SGLANG_ORDERS["lpm"](SimConfig(prefix_cache=False)) is None
    assert SGLANG_ORDERS["dfs-weight"](SimConfig(prefix_cache=False)) is None
    q = [req(0, [7]), req(1, [1])]
    assert idx(order("lpm")(q, 0.0, replica(prefix=False))) == [0, 1]


def test_lpm_recomputes_when_the_cache_changes():
    rep = replica(cached=[])
    o = order("lpm")
    q = [req(0, [7]), req(1, [1, 2])]
    assert idx(o(q, 0.0, rep)) == [0, 1]
    assert idx(o(q, 0.0, rep)) == [0, 1]  # unchanged queue and cache: same answer
    rep.prefix.insert([1])
    assert idx(o(q, 0.0, rep)) == [1, 0]


def test_dfs_weight_groups_shared_prefixes_heaviest_subtree_first():
    # cached tree: A=1 -> B=2 and C=3; D=9 alone
    rep = replica(cached=[1, 2, 3, 9])
    q = [req(0, [9, 90]),      # under D
         req(1, [1, 2, 20]),   # under A/B
         req(2, [5]),          # nothing cached: root
         req(3, [1, 3, 30]),   # under A/C
         req(4, [1, 2, 21]),   # under A/B
         req(5, [1, 40])]      # at A itself
    # A weighs 4 (B 2, C 1, itself 1) > D 1; inside A: B before C, then A's own; root's last
    assert idx(order("dfs-weight")(q, 0.0, rep)) == [1, 4, 3, 5, 0, 2]


def test_dfs_weight_does_not_fall_back_in_0_5_17():
    rep = replica(cached=[1])
    n = CACHE_AWARE_QUEUE_LIMIT + 5
    q = [req(i, [100 + i]) for i in range(n)] + [req(n, [1, 2])]
    assert idx(order("dfs-weight")(q, 0.0, rep))[0] == n


def test_lof_longest_output_first_stable():
    q = [req(0, None, 100, out=5), req(1, None, 100, out=50), req(2, None, 100, out=5),
         req(3, None, 100, out=70)]
    assert idx(order("lof")(q, 0.0, replica())) == [3, 1, 0, 2]


def test_hrrn_ranks_by_waited_prefill_tokens_over_uncached_tokens():
    rep = replica(cached=[1, 2], prefill_tokens=10_000)
    q = [req(0, [7, 8, 9, 10], queued=0),         # 10000 / 2048 = 4.9
         req(1, [11], queued=6000),               # 4000 / 512 = 7.8
         req(2, [1, 2, 12], queued=9000),         # 1000 / 512 (2 blocks cached) = 1.95
         req(3, [13, 14], queued=0)]              # 10000 / 1024 = 9.8
    assert idx(order("hrrn")(q, 0.0, rep)) == [3, 1, 0, 2]


def test_hrrn_fully_cached_first_held_back_last_and_fallback():
    rep = replica(cached=[1], prefill_tokens=100)
    q = [req(0, [5, 6]), req(1, [1], prompt=1), req(2, [5, 7])]  # 1: nothing to prefill
    assert idx(order("hrrn")(q, 0.0, rep)) == [1, 0, 2]  # 2 shares 0's uncached block 5
    big = [req(i, [100 + i], queued=i) for i in range(CACHE_AWARE_QUEUE_LIMIT + 1)]
    assert idx(order("hrrn")(big, 0.0, rep)) == list(range(len(big)))


@pytest.fixture(scope="module")
def mooncake():
    return load_trace("mooncake")


def _run(trace, policy: str, n: int = 60, qps: float = 6.0):
    cfg = SimConfig(gpus=1, qps=qps, num_requests=n, schedule_policy=policy, frontend=False)
    sim = Simulation(cfg, build_arrivals(trace, qps, n, 0), "sglang-chunked")
    moved = []
    for rep in sim.replicas:
        inner = rep.order

        def spy(queue, now, r, inner=inner):
            before = list(queue)
            out = inner(before, now, r)
            assert sorted(map(id, out)) == sorted(map(id, before))  # a permutation
            moved.append(out != before)
            return out

        rep.order = spy if inner is not None else None
    return sim.run(), moved, sim


def test_simulation_with_lpm_runs_and_reorders(mooncake):
    res, moved, sim = _run(mooncake, "lpm")
    assert moved and any(moved)
    assert sum(rep.prefill_tokens for rep in sim.replicas) > 0
    base, none, _ = _run(mooncake, "fcfs")
    assert none == []  # fcfs installs no hook
    assert res is not None and base is not None
