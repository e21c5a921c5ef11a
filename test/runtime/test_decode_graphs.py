"""Decode graphs per partition: which sizes, on which stream, with which attention backend."""

from __future__ import annotations

import contextlib

import pytest

from sglang_duet.partition.plan import graphs_wanted
from sglang_duet.runtime import decode_graphs, patches


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
        with patches.capture_on("partition"):
            with dcgr.graph_capture() as s1, dcgr.graph_capture(stream="other") as s2:
                assert (s1, s2) == ("partition", "other")


class TestSideStreams:
    """SGLang's side streams (KV pool, model helpers) are off while a partition captures."""

    class Module:
        def __init__(self, alt):
            self.alt_stream = alt

    class Runner:
        def __init__(self, pool, modules):
            self.token_to_kv_pool = pool
            mods = modules

            class Model:
                def modules(self):
                    return iter(mods)

            self.model = Model()

    def test_off_during_capture_and_restored(self, dcgr):
        pool, moe, plain = self.Module("kv-alt"), self.Module("moe-alt"), self.Module(None)
        mr = FakeModelRunner(dcgr)
        mr.token_to_kv_pool, mr.model = pool, self.Runner(None, [plain, moe]).model
        seen = []
        inner = mr.runner_cls

        class Recording(inner):
            def __init__(self, model_runner, attn_backend=None):
                seen.append((pool.alt_stream, moe.alt_stream))
                super().__init__(model_runner, attn_backend)

        mr.runner_cls = Recording
        decode_graphs.capture(mr, FakePartitions(), (16,))
        assert seen == [(None, None)]
        assert (pool.alt_stream, moe.alt_stream, plain.alt_stream) == ("kv-alt", "moe-alt", None)

    def test_owners_found(self):
        pool, moe = self.Module("a"), self.Module("b")
        runner = self.Runner(pool, [moe, self.Module(None)])
        assert patches.side_stream_owners(runner) == [pool, moe]
        assert patches.side_stream_owners(object()) == []


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

    def test_kv_pool_side_stream_is_an_attribute_pdmux_turns_off(self):
        import inspect

        from sglang.srt.mem_cache import kv_cache_configurator, memory_pool

        assert "self.alt_stream" in inspect.getsource(memory_pool.MHATokenToKVPool.__init__)
        src = inspect.getsource(kv_cache_configurator)
        assert "enable_alt_stream=not get_disagg().enable_pdmux" in src

    def test_eager_runner_honours_the_no_copy_switch(self):
        import inspect

        from sglang.srt.model_executor.runner.eager_runner import EagerRunner

        assert "SGLANG_EAGER_INPUT_NO_COPY" in inspect.getsource(EagerRunner.load_batch)


class TestStartupMemory:
    """The partition phases' memory is taken out of SGLang's static fraction before it sizes
    the KV cache (SGLang's own estimate per decode capture: max_bs * 2 MiB)."""

    GIB = 1 << 30

    def server_args(self, backend="fa3", fraction=0.85, max_bs=256, no_graphs=False):
        from types import SimpleNamespace as NS

        sa = NS(attention_backend=backend, prefill_attention_backend=None,
                mem_fraction_static=fraction, disable_cuda_graph=no_graphs,
                cuda_graph_config=NS(decode=NS(max_bs=max_bs)), overrides=[])

        def override(source, **fields):  # SGLang's only way to change resolved args
            sa.overrides.append(source)
            sa.__dict__.update(fields)

        sa.override = override
        return sa

    def test_six_captures_of_256_on_an_h200(self):
        from sglang_duet.args import DuetArgs

        sa = self.server_args()
        total = 141 * self.GIB
        got = decode_graphs.reserve_for_partitions(sa, DuetArgs(decode_graph_sizes=6), total)
        assert got == 6 * 256 * 2 * decode_graphs.MIB  # 3 GiB
        assert sa.mem_fraction_static == round(0.85 - 3 / 141, 4)
        assert sa.overrides == ["sglang-duet partition reserve"]

    def test_flashinfer_adds_the_prefill_workspace(self):
        from sglang.srt.environ import envs

        from sglang_duet.args import DuetArgs

        sa = self.server_args(backend="flashinfer", no_graphs=True)
        got = decode_graphs.reserve_for_partitions(sa, DuetArgs(), 80 * self.GIB)
        assert got == envs.SGLANG_FLASHINFER_WORKSPACE_SIZE.get() > 0

    def test_nothing_to_keep(self):
        from sglang_duet.args import DuetArgs

        sa = self.server_args()
        args = DuetArgs(partition_backend="libsmctrl")  # no partition graphs there
        assert decode_graphs.reserve_for_partitions(sa, args, 80 * self.GIB) == 0
        assert sa.mem_fraction_static == 0.85

    def test_too_little_left_is_a_clear_error(self):
        with pytest.raises(ValueError, match="--duet-decode-graph-sizes"):
            decode_graphs.lowered_fraction(0.06, 1 << 30, 40 << 30)

    def test_resolved_server_args_change_only_through_override(self):
        """A bare assignment to resolved ServerArgs raises in SGLang 0.5.17; override() is the
        one way, and run_scheduler_process publishes the args after the reserve is taken."""
        import inspect

        import sglang.srt.managers.scheduler as sched_mod
        from sglang.srt.server_args import ServerArgs

        assert inspect.signature(ServerArgs.override).parameters.keys() >= {"source", "fields"}
        assert "read-only" in inspect.getsource(ServerArgs.__setattr__)
        body = inspect.getsource(sched_mod.run_scheduler_process)
        assert 'publish(server_args, role="scheduler")' in body

    def test_sglang_reserves_max_bs_times_two_per_decode_capture(self):
        """Pins the SGLang estimate the reserve copies (ServerArgs.reserve_for_graph_mb)."""
        import inspect

        from sglang.srt.server_args import ServerArgs

        src = inspect.getsource(ServerArgs.reserve_for_graph_mb)
        assert "decode_cuda_graph_config.max_bs * 2" in src
