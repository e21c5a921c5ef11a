"""PhaseRunners on real partition streams: each phase's stream starts after the work queued on
the scheduler's stream, and the scheduler's stream waits for a phase before reading its results
(the partition streams are non-blocking, so neither happens by itself)."""

from __future__ import annotations

import contextlib
import types

import pytest

from sglang_duet.partition import PartitionMenu
from sglang_duet.partition.green_ctx import GreenCtxBackend
from sglang_duet.runtime import patches
from sglang_duet.runtime.phases import PhaseRunners

pytestmark = pytest.mark.gpu

SLEEP_CYCLES = 200_000_000  # ~0.1 s at H100/H200 clocks: far longer than launching the reads


@pytest.fixture(scope="module")
def menu(kernel):
    ok, why = GreenCtxBackend().available(0)
    if not ok:
        pytest.skip(f"green-ctx unavailable: {why}")
    m = PartitionMenu.build(GreenCtxBackend(), 0, min_decode=16, min_prefill=16)
    yield m
    m.close()


@pytest.fixture
def phases(menu, monkeypatch):
    # SGLang is not needed to check the streams: its input switch is a no-op here.
    monkeypatch.setattr(patches, "no_input_copy", contextlib.nullcontext)
    runner = types.SimpleNamespace(
        attn_backend=None, decode_cuda_graph_runner=None, prefill_cuda_graph_runner=None
    )
    return PhaseRunners(runner, "decode", "prefill", partitions=menu)


def test_phase_streams_wait_for_the_scheduler_stream(phases, menu):
    import torch

    s_d = menu.decode_sizes[0]
    x = torch.zeros(1 << 20, device="cuda")
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)  # scheduler stream busy, then it writes the inputs
    x.fill_(1.0)
    with phases.decode(s_d):
        y = x + 1  # decode stream: must see the 1s
    with phases.prefill(s_d):
        z = x * 3  # prefill stream: likewise
    phases.join(s_d, 0)
    phases.join(s_d, 1)
    assert y.min().item() == 2.0 and z.min().item() == 3.0


def test_scheduler_stream_waits_for_a_phase_after_join(phases, menu):
    import torch

    s_d = menu.decode_sizes[-1]
    out = torch.zeros(1 << 20, device="cuda")
    torch.cuda.synchronize()
    with phases.prefill(s_d):
        torch.cuda._sleep(SLEEP_CYCLES)
        out.fill_(5.0)
    phases.join(s_d, 1)
    seen = out.clone()  # on the scheduler stream, after the join
    assert seen.min().item() == 5.0


def test_join_probe_keeps_device_events_or_says_why(phases, menu):
    """Whether this driver records primary-context events on green-context streams (the
    joins stay on the device) or the runtime fell back to host syncs; both are correct, the
    result says which one the GPU check saw."""
    phases.probe_join()
    import torch

    s_d = menu.decode_sizes[0]
    out = torch.zeros(1 << 20, device="cuda")
    with phases.decode(s_d):
        torch.cuda._sleep(SLEEP_CYCLES)
        out.fill_(7.0)
    phases.join(s_d, 0)
    assert out.clone().min().item() == 7.0
    print(f"phases join: {'host sync' if phases.host_join else 'device events'}")


def test_a_step_mark_is_waited_for_alone(phases, menu):
    """Look-ahead delivery (runtime/lookahead.py): after waiting for step 0's mark the scheduler
    stream reads step 0's result while a later step is still running on the decode stream."""
    import torch

    s_d = menu.decode_sizes[0]
    mark = phases.marker(s_d)
    if mark is None:
        pytest.skip("host joins: events are refused across contexts, marks are off")
    x = torch.zeros(1 << 20, device="cuda")
    torch.cuda.synchronize()
    with phases.decode(s_d):
        y0 = x + 1  # step 0
        m0 = mark()
        torch.cuda._sleep(SLEEP_CYCLES * 10)  # step 1: ~1 s
        y1 = x + 2
        m1 = mark()
    phases.wait(m0)
    assert y0.min().item() == 1.0  # read on the scheduler stream: waits for step 0 only
    assert not m1.query()  # step 1 still running
    phases.wait(m1)
    assert y1.min().item() == 2.0
