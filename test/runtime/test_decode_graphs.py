"""Decode graphs per partition: which sizes, on which stream, with which attention backend."""

from __future__ import annotations

import contextlib

import pytest

from sglang_duet.runtime import decode_graphs
from sglang_duet.runtime.decode_graphs import graphs_wanted, spread


class TestSpread:
    @pytest.mark.parametrize(
        ("sizes", "n", "want"),
        [
            ((16, 24, 32, 40, 48), 0, ()),
            ((16, 24, 32, 40, 48), 1, (16,)),
            ((16, 24, 32, 40, 48), 2, (16, 48)),
            ((16, 24, 32, 40, 48), 3, (16, 32, 48)),
            ((16, 24, 32, 40, 48), 9, (16, 24, 32, 40, 48)),
            (tuple(range(16, 113, 8)), 6, (16, 32, 56, 72, 96, 112)),
            ((), 4, ()),
        ],
    )
    def test_cases(self, sizes, n, want):
        assert spread(sizes, n) == want

    @pytest.mark.parametrize("n", range(1, 14))
    def test_ends_kept_and_count_exact(self, n):
        sizes = tuple(range(16, 113, 8))  # 13 sizes, an H100 green-ctx menu
        got = spread(sizes, n)
        assert len(got) == n
        assert got[0] == 16
        assert n == 1 or got[-1] == 112
        assert set(got) <= set(sizes)


class TestWanted:
    def test_only_green_ctx_with_graphs_and_a_positive_count(self):
        assert graphs_wanted("green-ctx", True, 4)[0]
        ok, why = graphs_wanted("libsmctrl", True, 4)
        assert not ok and "libsmctrl" in why
        ok, why = graphs_wanted("green-ctx", False, 4)
        assert not ok and "without CUDA graphs" in why
        ok, why = graphs_wanted("green-ctx", True, 0)
        assert not ok and "--duet-decode-graph-sizes 0" in why


class FakeModelRunner:
    """What decode_graphs.capture touches: backends, SGLang's runner class, the attribute."""

    def __init__(self, dcgr, fail_at=None):
        self.attn_backend = "sglang-backend"
        self.made = 0
        self.seen = []  # (stream captured on, attn_backend during capture, runner's backend)
        runner = self

        class Runner:
            capture_bs = [1, 2, 4]

            def __init__(self, model_runner, attn_backend=None):
                assert model_runner is runner
                with dcgr.graph_capture() as ctx:  # what SGLang's capture() opens
                    if fail_at is not None and len(runner.seen) == fail_at:
                        raise RuntimeError("capture failed")
                    runner.seen.append((ctx, model_runner.attn_backend, attn_backend))
                self.attn_backend = attn_backend

        self.runner_cls = Runner

    def _decode_cuda_graph_runner_cls(self):
        return self.runner_cls

    def _get_attention_backend(self, init_new_workspace=False):
        self.made += 1
        return f"backend{self.made}-{'new' if init_new_workspace else 'shared'}-ws"


class FakePartitions:
    def streams(self, s_d):
        return f"decode-stream-{s_d}", f"prefill-stream-{s_d}"


@pytest.fixture
def dcgr(monkeypatch):
    """SGLang's decode graph runner module, with graph_capture recording its stream."""
    import sglang.srt.model_executor.runner.decode_cuda_graph_runner as module

    @contextlib.contextmanager
    def graph_capture(stream=None):
        yield stream or "a-stream-of-its-own"

    monkeypatch.setattr(module, "graph_capture", graph_capture)
    return module


class TestCapture:
    def test_one_runner_per_size_on_its_decode_stream_with_its_backend(self, dcgr):
        mr = FakeModelRunner(dcgr)
        runners, backends = decode_graphs.capture(mr, FakePartitions(), (16, 64))
        assert sorted(runners) == sorted(backends) == [16, 64]
        assert mr.seen == [
            ("decode-stream-16", "backend1-shared-ws", "backend1-shared-ws"),
            ("decode-stream-64", "backend2-shared-ws", "backend2-shared-ws"),
        ]
        assert runners[64].attn_backend == backends[64] != backends[16]
        # Restored: SGLang's backend, and graph_capture makes its own stream again.
        assert mr.attn_backend == "sglang-backend"
        with dcgr.graph_capture() as stream:
            assert stream == "a-stream-of-its-own"

    def test_a_failed_capture_restores_sglang_state(self, dcgr):
        mr = FakeModelRunner(dcgr, fail_at=1)
        with pytest.raises(RuntimeError, match="capture failed"):
            decode_graphs.capture(mr, FakePartitions(), (16, 64))
        assert mr.attn_backend == "sglang-backend"
        with dcgr.graph_capture() as stream:
            assert stream == "a-stream-of-its-own"

    def test_explicit_stream_wins(self, dcgr):
        with decode_graphs._capture_on("partition"):
            with dcgr.graph_capture() as s1, dcgr.graph_capture(stream="other") as s2:
                assert (s1, s2) == ("partition", "other")


class TestSglangContract:
    """What capture() relies on in SGLang 0.5.17; fails loudly if an upgrade moves it."""

    def test_runner_takes_its_backend_and_captures_via_the_module_graph_capture(self):
        import inspect

        import sglang.srt.model_executor.runner.decode_cuda_graph_runner as dcgr
        from sglang.srt.model_executor.model_runner import ModelRunner

        init = inspect.signature(dcgr.DecodeCudaGraphRunner.__init__).parameters
        assert "attn_backend" in init
        # The non-PD-multiplexing capture opens graph_capture() without a stream of its own.
        assert "graph_capture()" in inspect.getsource(dcgr.DecodeCudaGraphRunner.capture)
        assert callable(dcgr.graph_capture)
        assert "init_new_workspace" in inspect.signature(
            ModelRunner._get_attention_backend
        ).parameters
        assert hasattr(ModelRunner, "_decode_cuda_graph_runner_cls")

    def test_eager_runner_honours_the_no_copy_switch(self):
        import inspect

        from sglang.srt.model_executor.runner.eager_runner import EagerRunner

        assert "SGLANG_EAGER_INPUT_NO_COPY" in inspect.getsource(EagerRunner.load_batch)
