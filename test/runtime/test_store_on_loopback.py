"""torch.distributed's store of `--nccl-port` listens on 127.0.0.1 only on one node, and as
SGLang has it (every interface) across nodes (#51 item 4): the start-up patch of
`runtime/patches.store_on_loopback`, driven through torch's own tcp:// rendezvous."""

from __future__ import annotations

import datetime
import types

import pytest

from helpers.net import listening
from helpers.server import free_port
from sglang_duet.runtime import patches

rdzv = pytest.importorskip("torch.distributed.rendezvous")


def args(**kw):
    return types.SimpleNamespace(**{"nnodes": 1, "dist_init_addr": None, **kw})


@pytest.fixture
def restore(monkeypatch):
    monkeypatch.setattr(rdzv, "_create_c10d_store", rdzv._create_c10d_store)
    monkeypatch.delenv("SGLANG_DISTRIBUTED_INIT_METHOD_OVERRIDE", raising=False)


def rendezvous(host: str, port: int):
    """What `init_process_group(init_method="tcp://HOST:PORT")` does for rank 0 of 1."""
    url = f"tcp://{host}:{port}?rank=0&world_size=1"
    store, _, _ = next(rdzv.rendezvous(url, timeout=datetime.timedelta(seconds=20)))
    return store


def test_one_node_store_listens_on_loopback_only(restore):
    port, other = free_port(), free_port()
    assert patches.store_on_loopback(args(), port)
    store = rendezvous("0.0.0.0", port)  # SGLang's init method with --host 0.0.0.0
    assert listening(port) == {"127.0.0.1"}
    store.set("k", "v")
    assert store.get("k") == b"v"
    kept = rendezvous("127.0.0.1", other)  # another port: torch's own store, untouched
    assert listening(other) <= {"0.0.0.0", "::"} and listening(other)
    del store, kept


@pytest.mark.parametrize("kw", [{"nnodes": 2}, {"dist_init_addr": "10.0.0.1:5000"}])
def test_across_nodes_sglang_behaviour_is_kept(restore, kw):
    port = free_port()
    assert not patches.store_on_loopback(args(**kw), port)
    store = rendezvous("127.0.0.1", port)
    assert listening(port) and "127.0.0.1" not in listening(port)  # every interface
    del store


def test_an_init_method_override_is_kept(restore, monkeypatch):
    monkeypatch.setenv("SGLANG_DISTRIBUTED_INIT_METHOD_OVERRIDE", "env://")
    assert not patches.store_on_loopback(args(), free_port())


@pytest.mark.server
def test_tp2_ranks_meet_on_loopback(tp2_server):
    """Two ranks: rank 0 hosts the store on 127.0.0.1, rank 1 connects there (the server
    started and serves); test_auth_matrix.py checks TP=1 and stock."""
    assert listening(tp2_server.nccl_port) == {"127.0.0.1"}
    assert tp2_server.generate([5, 6, 7], 2, ignore_eos=True)["output_ids"]
