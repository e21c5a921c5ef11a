"""Routers without a model: SGLang's rules, speculative accounting, refresh throttle, dead
replicas, the registry."""

from __future__ import annotations

import pytest

from sglang_duet.router import ROUTERS, NoReplicaError, ReplicaLoad, RouterContext, make_router


def _load(i: int, t: float = 1.0, **kw) -> ReplicaLoad:
    return ReplicaLoad(replica=i, timestamp=t, **kw)


class TestRegistry:
    def test_names(self):
        assert set(ROUTERS) == {"duet", "round-robin", "least-tokens", "total-requests",
                                "total-tokens", "vllm-dp"}

    def test_unknown_name_lists_choices(self):
        with pytest.raises(ValueError, match="unknown router 'random'.*round-robin"):
            make_router("random", 2)

    def test_duet_needs_a_model(self):
        with pytest.raises(ValueError, match="latency model"):
            make_router("duet", 2)


class TestRoundRobin:
    def test_cycles_and_skips_dead(self):
        r = make_router("round-robin", 3)
        assert [r.pick(10).replica for _ in range(4)] == [0, 1, 2, 0]
        r.set_alive(1, False)
        assert {r.pick(10).replica for _ in range(4)} == {0, 2}
        assert r.dispatch_counts()[1] == 1

    def test_no_replica_left(self):
        r = make_router("round-robin", 1)
        r.set_alive(0, False, "test")
        with pytest.raises(NoReplicaError):
            r.pick(1)


class TestSglangRules:
    def test_total_requests_counts_dispatches_until_next_report(self):
        r = make_router("total-requests", 2)
        r.observe([_load(0, running=3), _load(1, running=1)], now=0.0)
        # replica 1 has 1 request: it gets two (1 -> 2 -> 3), then the tie goes to index 0
        assert [r.pick(5).replica for _ in range(3)] == [1, 1, 0]

    def test_total_tokens_tie_breaks_on_requests_then_index(self):
        r = make_router("total-tokens", 3)
        r.observe([_load(0, total_tokens=100, running=2), _load(1, total_tokens=100, running=1),
                   _load(2, total_tokens=100, running=1)], now=0.0)
        assert r.pick(50).replica == 1
        assert r.pick(50).replica == 2  # 1 now holds 150 tokens
        assert r.pick(10).replica == 0

    def test_least_tokens_ties_on_requests(self):
        r = make_router("least-tokens", 2)
        r.observe([_load(0, running=3), _load(1, running=1)], now=0.0)
        assert r.pick(0).replica == 1

    def test_refresh_is_throttled_like_sglang(self):
        r = make_router("least-tokens", 2, RouterContext(refresh_s=0.02))
        assert r.observe([_load(0, queued_tokens=0), _load(1, queued_tokens=500)], now=1.0)
        assert r.pick(1000).replica == 0  # 0 now has 1000 queued
        # a report 10 ms later is not applied: the dispatched 1000 tokens still count
        assert not r.observe([_load(0, t=2.0), _load(1, t=2.0, queued_tokens=500)], now=1.01)
        assert r.pick(10).replica == 1
        assert r.observe([_load(0, t=3.0), _load(1, t=3.0, queued_tokens=500)], now=1.05)
        assert r.pick(10).replica == 0

    def test_vllm_dp_weighs_waiting_four_times_and_counts_its_choice(self):
        r = make_router("vllm-dp", 2)
        r.observe([_load(0, running=3, waiting=0), _load(1, running=0, waiting=1)], now=0.0)
        # scores 3 and 4: replica 0; it then counts one more waiting (7), so 1 (4) is next
        assert [r.pick(10).replica for _ in range(3)] == [0, 1, 0]
        # prompt length plays no part
        r.observe([_load(0, t=2.0), _load(1, t=2.0)], now=1.0)
        assert r.pick(100000).replica == 0 and r.pick(1).replica == 1

    def test_vllm_dp_applies_reports_every_100_ms_whatever_the_context(self):
        r = make_router("vllm-dp", 2, RouterContext(refresh_s=0.02))
        assert r.observe([_load(0), _load(1)], now=1.0)
        assert not r.observe([_load(0, t=2.0), _load(1, t=2.0)], now=1.05)
        assert r.observe([_load(0, t=3.0), _load(1, t=3.0)], now=1.1)

    def test_stale_report_is_skipped(self):
        r = make_router("least-tokens", 1)
        r.observe([_load(0, t=5.0, queued_tokens=7)], now=0.0)
        r.pick(3)
        r.observe([_load(0, t=5.0, queued_tokens=7)], now=1.0)  # same timestamp: stale
        assert r.views[0].queued_tokens == 10
