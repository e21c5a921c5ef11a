"""The --dp-size dispatch in SGLang's controller, without processes: snapshots in, one socket
send per request, a dead replica routed around with a logged fallback."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

pytest.importorskip("sglang")

from sglang.srt.managers.load_snapshot import LoadSnapshot  # noqa: E402

from sglang_duet.router import NoReplicaError, make_router  # noqa: E402
from sglang_duet.runtime import dispatch  # noqa: E402
from sglang_duet.runtime.router_metrics import RouterMetrics  # noqa: E402


class _Proc:
    def __init__(self, alive=True):
        self.alive = alive

    def is_alive(self):
        return self.alive


def _controller(monkeypatch, procs, snaps):
    sent = []
    monkeypatch.setattr(dispatch, "sock_send", lambda sock, req: sent.append((sock, req.rid)))
    c = object.__new__(dispatch.DuetDataParallelController)
    c.duet_router = make_router("least-tokens", len(procs))
    c.router_metrics = RouterMetrics(False, len(procs))
    c.scheduler_procs = procs
    c._procs_per_replica = 1
    c.workers = [f"sock{i}" for i in range(len(procs))]
    c.load_snapshot_reader = SimpleNamespace(read_all=lambda: snaps)
    c.maybe_external_dp_rank_routing = lambda req: False
    return c, sent


def _req(rid, n=10):
    return SimpleNamespace(rid=rid, input_ids=list(range(n)))


def test_requests_follow_the_router_and_are_counted(monkeypatch, caplog):
    snaps = [LoadSnapshot(timestamp=1.0, dp_rank=0, num_waiting_uncached_tokens=50),
             LoadSnapshot(timestamp=1.0, dp_rank=1)]
    c, sent = _controller(monkeypatch, [_Proc(), _Proc()], snaps)
    with caplog.at_level(logging.DEBUG, logger="sglang_duet.router"):
        for i in range(3):
            c.duet_dispatch(_req(f"r{i}", 30))
    assert [s for s, _ in sent] == ["sock1", "sock1", "sock0"]  # 1 had 0 queued, then 30, 60
    assert c.router_metrics.counts == [1, 2]
    lines = [r.getMessage() for r in caplog.records if "duet-router" in r.getMessage()]
    assert len(lines) == 3 and "-> replica 1" in lines[0] and "least queued tokens" in lines[0]


def test_dead_replica_gets_a_logged_fallback(monkeypatch, caplog):
    c, sent = _controller(monkeypatch, [_Proc(alive=False), _Proc()], [])
    with caplog.at_level(logging.WARNING):
        c.duet_dispatch(_req("a"))
        c.duet_dispatch(_req("b"))
    assert [s for s, _ in sent] == ["sock1", "sock1"]
    assert any("replica 0 unavailable" in r.getMessage() for r in caplog.records)


def test_no_replica_left_raises(monkeypatch):
    c, sent = _controller(monkeypatch, [_Proc(alive=False)], [])
    with pytest.raises(NoReplicaError):
        c.duet_dispatch(_req("a"))
    assert sent == []
