"""TP=2 on the CPU (gloo, two processes on 127.0.0.1): inside `patches.prefill_tp_group` every
collective a dense forward issues, and every group getter SGLang's layers call, names the
prefill phase's communicator; outside (and after) the block, the decode's (SGLang's `_TP`).

A spatial prefill's collective on the decode's communicator runs concurrently with the decode
graphs' own on the GPU (a shared custom all-reduce buffer: hang or wrong sums), so this is the
TP=2 check the one-GPU device runs cannot make."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("tp2_collectives.py")
# Getters whose group is SGLang's `_TP` object in a dense TP=2 run without DP attention (the
# others, attention-CP and MoE DP/EP, are groups of their own there).
TP_GETTERS = ("get_tp_group", "get_attn_tp_group", "get_moe_tp_group", "parallel.tp_group",
              "parallel.attn_tp_group", "parallel.moe_tp_group", "sampler.tp_sync_group")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    """Each rank's record (the worker's JSON line); both processes bounded to 180 s."""
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(WORKER.parents[2] / "python"), os.environ.get("PYTHONPATH", "")]))
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(r), str(port)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in (0, 1)]
    out = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=180)
            assert p.returncode == 0, stderr[-3000:]
            out.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return out


def test_every_prefill_collective_names_the_prefill_group(ranks):
    for rank in ranks:
        inside = rank["inside"]["collectives"]
        assert len(inside) == 6, inside
        assert all(c.endswith(":prefill") for c in inside), inside


def test_every_tp_getter_resolves_to_the_prefill_group_inside(ranks):
    for rank in ranks:
        getters = rank["inside"]["getters"]
        assert {g: getters[g] for g in TP_GETTERS} == {g: "prefill" for g in TP_GETTERS}
        assert getters["logits_processor._logits_gatherer"] != "decode"  # its multimem buffer


@pytest.mark.parametrize("phase", ["outside", "after"])
def test_decode_collectives_stay_on_the_decode_group(ranks, phase):
    """Before the block and after it (restored), everything is the decode's `_TP`."""
    for rank in ranks:
        record = rank[phase]
        assert record["collectives"] and all(
            c.endswith(":decode") for c in record["collectives"]), record["collectives"]
        assert {g: record["getters"][g] for g in TP_GETTERS} == {g: "decode" for g in TP_GETTERS}
        assert record["getters"]["logits_processor._logits_gatherer"] == "decode"


def test_logits_gatherer_owners_are_found_once_per_model():
    """The walk over the model's modules happens once per model, not every spatial prefill."""
    import torch

    from sglang_duet.runtime import patches

    head, other = torch.nn.Module(), torch.nn.Module()
    head._logits_gatherer = "decode's"
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), head)
    assert patches._gatherer_owners(model) == [head]
    other._logits_gatherer = "added later"
    model.append(other)
    assert patches._gatherer_owners(model) == [head]  # cached for this model
    assert patches._gatherer_owners(torch.nn.Sequential(other)) == [other]
