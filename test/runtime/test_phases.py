"""PhaseRunners: each phase of a spatial iteration runs with its own backend, graphs, inputs and
stream, and SGLang's own state is back in place afterwards (also after an error)."""

from __future__ import annotations

import contextlib

import pytest
import torch

from sglang_duet.runtime import decode_graphs
from sglang_duet.runtime.patches import swapped
from sglang_duet.runtime.phases import PhaseRunners


class FakeModelRunner:
    def __init__(self):
        self.attn_backend = "sglang-backend"
        self.decode_cuda_graph_runner = "sglang-decode-graphs"
        self.prefill_cuda_graph_runner = "sglang-prefill-graphs"
        self.made = []

    def _get_attention_backend(self, init_new_workspace=False):
        self.made.append(init_new_workspace)
        return f"backend{len(self.made)}"

    def state(self):
        return self.attn_backend, self.decode_cuda_graph_runner, self.prefill_cuda_graph_runner


SGLANG_STATE = ("sglang-backend", "sglang-decode-graphs", "sglang-prefill-graphs")


def no_copy() -> bool:
    from sglang.srt.environ import envs

    return bool(envs.SGLANG_EAGER_INPUT_NO_COPY.get())


class TestSwaps:
    def test_build_makes_a_shared_decode_and_an_own_workspace_prefill_backend(self, monkeypatch):
        mr = FakeModelRunner()
        calls = []
        monkeypatch.setattr(
            decode_graphs, "capture",
            lambda m, p, sizes: calls.append(sizes) or ({16: "g16"}, {16: "b16"}),
        )
        assert PhaseRunners.build(mr).graphs == {}
        assert mr.made == [False, True] and not calls
        phases = PhaseRunners.build(mr, "menu", (16,))
        assert calls == [(16,)]
        assert (phases.graphs, phases.graph_backends) == ({16: "g16"}, {16: "b16"})

    def test_decode_uses_the_partitions_graphs_else_its_backend_eagerly(self):
        mr = FakeModelRunner()
        phases = PhaseRunners(mr, "decode-b", "prefill-b", {16: "g16"}, {16: "gb16"})
        with phases.decode(16):
            assert mr.state() == ("gb16", "g16", "sglang-prefill-graphs")
            assert not no_copy()
        assert mr.state() == SGLANG_STATE
        with phases.decode(24):  # no graphs captured for 24 SMs: eager, decode's own backend
            assert mr.state() == ("decode-b", None, "sglang-prefill-graphs")
        assert mr.state() == SGLANG_STATE

    def test_prefill_own_backend_no_graphs_no_input_copy(self):
        mr = FakeModelRunner()
        phases = PhaseRunners(mr, "decode-b", "prefill-b")
        before = no_copy()
        with phases.prefill(16):
            assert mr.state() == ("prefill-b", "sglang-decode-graphs", None)
            assert no_copy()
        assert mr.state() == SGLANG_STATE
        assert no_copy() == before

    def test_restored_after_an_error(self):
        mr = FakeModelRunner()
        phases = PhaseRunners(mr, "decode-b", "prefill-b", {16: "g16"}, {16: "gb16"})
        for ctx in (phases.decode(16), phases.prefill(16)):
            with pytest.raises(ValueError), ctx:
                raise ValueError("launch failed")
            assert mr.state() == SGLANG_STATE
        assert not no_copy()

    def test_swapped_restores_every_attribute(self):
        mr = FakeModelRunner()
        with swapped(mr, attn_backend=1, decode_cuda_graph_runner=2):
            assert mr.state()[:2] == (1, 2)
        assert mr.state() == SGLANG_STATE


class FakeStream:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def wait_stream(self, other):
        if getattr(other, "refuses_events", False):
            raise RuntimeError("CUDA error: invalid resource handle")
        self.log.append(f"{self.name} waits {other.name}")

    def synchronize(self):
        self.log.append(f"host syncs {self.name}")


class TestStreams:
    @pytest.fixture
    def log(self, monkeypatch):
        log: list[str] = []
        current = [FakeStream("main", log)]

        @contextlib.contextmanager
        def on(stream):
            log.append(f"enter {stream.name}")
            current.append(stream)
            yield
            current.pop()
            log.append(f"leave {stream.name}")

        monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: current[-1])
        monkeypatch.setattr(torch.cuda, "stream", on)
        return log

    def test_fork_before_launch_and_join_before_results(self, log):
        class Menu:
            def streams(self, s_d):
                return FakeStream(f"d{s_d}", log), FakeStream(f"p{s_d}", log)

        phases = PhaseRunners(FakeModelRunner(), "decode-b", "prefill-b", partitions=Menu())
        with phases.decode(32):
            log.append("launch decode")
        with phases.prefill(32):
            log.append("launch prefill")
        phases.join(32, 0)
        phases.join(32, 1)
        assert log == [
            "d32 waits main", "enter d32", "launch decode", "leave d32",
            "p32 waits main", "enter p32", "launch prefill", "leave p32",
            "main waits d32", "main waits p32",
        ]

    def test_no_partitions_no_streams(self, log):
        phases = PhaseRunners(FakeModelRunner(), "decode-b", "prefill-b")
        with phases.decode(32), phases.prefill(32):
            pass
        phases.join(32, 0)
        assert log == []


class TestJoinFallback:
    """A driver that refuses primary-context events on green-context streams: the joins fall
    back to host syncs, found by the start-up probe (like concurrent_torch.Clock)."""

    @pytest.fixture
    def log(self, monkeypatch):
        log: list[str] = []
        main = FakeStream("main", log)
        monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: main)
        return log

    def menu(self, log, refuses):
        class Menu:
            decode_sizes = (16, 32)

            def streams(self, s_d):
                d, p = FakeStream(f"d{s_d}", log), FakeStream(f"p{s_d}", log)
                d.refuses_events = p.refuses_events = refuses
                return d, p

        return Menu()

    def test_probe_switches_to_host_syncs(self, log):
        phases = PhaseRunners(FakeModelRunner(), "d", "p", partitions=self.menu(log, True))
        phases.probe_join()
        assert phases.host_join
        log.clear()
        phases.join(32, 0)
        phases.join(32, 1)
        assert log == ["host syncs d32", "host syncs p32"]

    def test_events_kept_where_they_work(self, log):
        phases = PhaseRunners(FakeModelRunner(), "d", "p", partitions=self.menu(log, False))
        phases.probe_join()
        assert not phases.host_join
        assert log == ["main waits d16", "main waits p16"]


def test_no_step_marks_without_streams():
    """Without partitions (CPU) the look-ahead has no per-step marks: the caller joins once,
    and waiting for a missing mark does nothing."""
    phases = PhaseRunners(FakeModelRunner(), "decode-b", "prefill-b")
    assert phases.marker(16) is None
    phases.wait(None)
