"""What the runtime replaces or reads in SGLang 0.5.17, pinned (see the contract table in
docs/architecture.md). An SGLang upgrade that moves one of these fails here, by name, before a
server test fails somewhere downstream."""

from __future__ import annotations

import dataclasses
import inspect
import os

import pytest


def src(obj) -> str:
    return inspect.getsource(obj)


def params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


@pytest.fixture(scope="module")
def sched_mod():
    import sglang.srt.managers.scheduler as module

    return module


class TestReplaced:
    def test_scheduler_class_is_looked_up_at_call_time(self, sched_mod):
        assert "Scheduler(" in src(sched_mod.run_scheduler_process)
        assert params(sched_mod.run_scheduler_process)[:4] == [
            "server_args", "port_args", "gpu_id", "tp_rank"]

    def test_start_method_is_set_just_before_the_children_start(self):
        """server/install.children_from_forkserver sets the forkserver method right after
        `_set_envs_and_config`, which the launch path calls by its module-global name before it
        starts the scheduler and detokenizer with `mp.Process`."""
        import sglang.srt.entrypoints.engine as engine

        assert 'mp.set_start_method("spawn", force=True)' in src(engine._set_envs_and_config)
        launch = src(engine.Engine._launch_subprocesses)
        assert (launch.index("_set_envs_and_config(server_args)")
                < launch.index("_launch_scheduler_processes(")
                < launch.index("_launch_detokenizer_subprocesses("))
        assert "mp.Process(" in src(engine.Engine._launch_scheduler_processes)
        assert "mp.Process(" in src(engine.Engine._launch_detokenizer_subprocesses)

    def test_prefill_step_is_a_method_the_loop_calls(self, sched_mod):
        body = src(sched_mod.Scheduler.get_next_batch_to_run)
        assert "self.get_new_batch_prefill(running_batch)" in body
        assert "prefill_plan.batch_to_run" in body and "prefill_plan.running_batch" in body

    def test_adder_budget_knobs_and_priority(self, sched_mod):
        from sglang.srt.managers.schedule_policy import SchedulePolicy

        # get_new_batch_prefill hands these to the adder (in a helper of the same class)
        body = src(sched_mod.Scheduler)
        for knob in ("chunked_prefill_size = self.chunked_prefill_size",
                     "self.max_prefill_tokens,", "if self.is_mixed_chunk else 0",
                     "self.policy.calc_priority(self.waiting_queue, running_batch)"):
            assert knob in body, knob
        assert params(SchedulePolicy.calc_priority)[:2] == ["self", "waiting_queue"]

    def test_grammar_queue_poll_of_the_prefill_step(self, sched_mod):
        from sglang.srt.constrained.grammar_manager import GrammarManager

        body = src(sched_mod.Scheduler._get_new_batch_prefill_raw)
        poll = body.index("self.grammar_manager.has_waiting_grammars()")
        assert poll < body.index("PrefillAdder(")  # first, before the adder
        assert "self.grammar_manager.get_ready_grammar_requests()" in body
        assert "self._add_request_to_queue(req)" in body
        assert params(GrammarManager.get_ready_grammar_requests) == ["self"]
        assert params(GrammarManager.has_waiting_grammars) == ["self"]
        assert params(sched_mod.Scheduler._add_request_to_queue)[:2] == ["self", "req"]
        # the idle loop keeps polling while a grammar compiles (no sleep on an idle socket)
        assert "len(self.grammar_manager.grammar_queue) == 0" in src(
            sched_mod.Scheduler.is_fully_idle)

    def test_result_processor_overlap_guard(self):
        from sglang.srt.managers.scheduler_components.batch_result_processor import (
            SchedulerBatchResultProcessor,
        )

        names = {f.name for f in dataclasses.fields(SchedulerBatchResultProcessor)}
        assert "enable_overlap" in names

    def test_no_copy_switch_and_workspace_size(self):
        from sglang.srt.environ import envs
        from sglang.srt.model_executor.runner.eager_runner import EagerRunner

        assert hasattr(envs, "SGLANG_EAGER_INPUT_NO_COPY")
        assert "SGLANG_EAGER_INPUT_NO_COPY" in src(EagerRunner.load_batch)
        assert envs.SGLANG_FLASHINFER_WORKSPACE_SIZE.get() > 0

    def test_phase_state_attributes_of_the_model_runner(self):
        from sglang.srt.model_executor.model_runner import ModelRunner

        body = src(ModelRunner)
        for name in ("self.attn_backend", "self.decode_cuda_graph_runner",
                     "self.prefill_cuda_graph_runner", "self.token_to_kv_pool"):
            assert name in body, name
        assert "init_new_workspace" in params(ModelRunner._get_attention_backend)
        assert hasattr(ModelRunner, "_decode_cuda_graph_runner_cls")

    def test_tp_group_hooks(self):
        import sglang.srt.distributed.bootstrap as bootstrap
        import sglang.srt.distributed.parallel_state as ps

        assert "duplicate_tp_group=" in src(bootstrap)
        assert "duplicate_tp_group" in params(ps.initialize_model_parallel)
        assert callable(ps.set_pdmux_status) and hasattr(ps, "_PDMUX_PREFILL_TP_GROUP")
        for kw in ("use_pynccl", "use_custom_allreduce", "use_mscclpp_allreduce",
                   "use_torch_symm_mem_allreduce"):
            assert kw in params(ps.init_model_parallel_group), kw

    def test_prefill_group_rebinds(self):
        """What `patches.prefill_tp_group` rebinds besides `set_pdmux_status`: the module
        globals that alias `_TP`, the sampler's cached token-sync group and the logits
        processor's multimem gatherer (both set in their constructors)."""
        import sglang.srt.distributed.parallel_state as ps
        import sglang.srt.layers.logits_processor as lp
        import sglang.srt.layers.sampler as sampler

        from sglang_duet.runtime.patches import TP_ALIASES

        assert all(hasattr(ps, name) for name in TP_ALIASES)
        assert "_ATTN_TP = _TP" in src(ps) and "return _ATTN_TP" in src(ps.get_attn_tp_group)
        assert "self.tp_sync_group = get_tp_group().device_group" in src(sampler.Sampler)
        assert "self._logits_gatherer(logits)" in src(lp.LogitsProcessor)

    def test_rope_cpu_flag(self):
        import sglang.srt.layers.rotary_embedding.base as rope_base

        assert hasattr(rope_base, "_is_cpu")

    def test_tp_embedding_mask_is_compiled_and_the_switch_runs_it_eagerly(self, monkeypatch):
        """patches.no_torch_compile_on_cpu: the TP > 1 embedding mask is SGLang's one
        `@torch.compile` function on the CPU path, and dynamo's `disable` (read per call) makes
        it run eagerly, with the same values."""
        import torch
        import torch._dynamo.config as dynamo_config
        from sglang.srt.layers import vocab_parallel_embedding as vpe

        if torch.cuda.is_available():
            pytest.skip("a CUDA device is present: the switch is CPU-only")
        assert "get_masked_input_and_mask(" in src(vpe.VocabParallelEmbedding._embed_local_shard)
        assert "@torch.compile" in src(vpe).split("def get_masked_input_and_mask")[0][-200:]
        from sglang_duet.runtime import patches

        monkeypatch.setattr(dynamo_config, "disable", False)
        patches.no_torch_compile_on_cpu()
        assert dynamo_config.disable is True
        ids = torch.tensor([0, 5, 9, 12])
        got, mask = vpe.get_masked_input_and_mask(ids, 4, 10, 0, 0, 0)
        assert got.tolist() == [0, 1, 5, 0] and mask.tolist() == [True, False, False, True]

    def test_lookahead_kv_fields_of_a_request(self):
        from sglang.srt.managers.schedule_batch import Req

        body = src(Req)
        assert "self.kv_committed_len" in body and "kv_allocated_len" in src(
            inspect.getmodule(Req))


    def test_disabled_model_archs_and_the_tiny_models_module(self, tmp_path, monkeypatch):
        """The registry skips the modules SGLANG_DISABLED_MODEL_ARCHS names (read from its
        source: importing the registry would import every model); the tiny model's class is
        in the module kept."""
        import importlib.util
        from pathlib import Path

        import sglang.srt.models.qwen3 as qwen3

        from sglang_duet.runtime import patches
        from sglang_duet.tiny_model import MARKER

        text = Path(importlib.util.find_spec("sglang.srt.models.registry").origin).read_text()
        assert 'name.split(".")[-1] in envs.SGLANG_DISABLED_MODEL_ARCHS.get()' in text
        entries = qwen3.EntryClass if isinstance(qwen3.EntryClass, list) else [qwen3.EntryClass]
        assert "Qwen3ForCausalLM" in [e.__name__ for e in entries]
        assert patches.TINY_MODEL_MODULES == ("qwen3",)

        monkeypatch.delenv("SGLANG_DISABLED_MODEL_ARCHS", raising=False)
        patches.skip_unused_model_modules(str(tmp_path))  # not the tiny model: untouched
        assert "SGLANG_DISABLED_MODEL_ARCHS" not in os.environ
        (tmp_path / MARKER).write_text("{}")
        patches.skip_unused_model_modules(str(tmp_path))
        skipped = os.environ["SGLANG_DISABLED_MODEL_ARCHS"].split(",")
        assert "qwen3" not in skipped and {"llama", "qwen2", "deepseek_v2"} <= set(skipped)
        monkeypatch.setenv("SGLANG_DISABLED_MODEL_ARCHS", "x")
        patches.skip_unused_model_modules(str(tmp_path))  # a value already set is kept
        assert os.environ["SGLANG_DISABLED_MODEL_ARCHS"] == "x"


class TestRead:
    def test_scheduler_methods_the_loop_uses(self, sched_mod):
        for name in ("process_input_requests", "get_next_batch_to_run", "update_running_batch",
                     "run_batch", "process_batch_result", "on_idle", "event_loop_normal"):
            assert callable(getattr(sched_mod.Scheduler, name)), name

    def test_next_batch_plan_fields(self):
        from sglang.srt.managers.schedule_batch import NextBatchPlan

        plan = NextBatchPlan(batch_to_run=None, running_batch=None)
        assert plan.batch_to_run is None and plan.running_batch is None

    def test_batch_and_request_fields_lookahead_reads(self):
        from sglang.srt.managers.schedule_batch import Req, ScheduleBatch

        for name in ("prepare_for_decode", "is_empty"):
            assert callable(getattr(ScheduleBatch, name)), name
        fields = {f.name for f in dataclasses.fields(ScheduleBatch)}
        for name in ("reqs", "forward_mode", "spec_algorithm", "return_logprob",
                     "return_hidden_states", "sampling_info", "req_to_token_pool",
                     "out_cache_loc"):
            assert name in fields, name
        # each look-ahead step's slots, one per request in batch order (lookahead.process)
        assert "self.out_cache_loc = alloc_for_decode(self, token_per_req=1)" in src(
            ScheduleBatch.prepare_for_decode)
        body = src(Req)
        for name in ("self.origin_input_ids", "self.output_ids", "self.prefix_indices",
                     "self.sampling_params", "self.grammar", "self.req_pool_idx"):
            assert name in body, name
        assert callable(Req.finished)

    def test_arrival_stamp_the_admission_order_reads(self):
        """`bridge.arrival_s`: a Req is stamped with time.perf_counter when the scheduler builds
        it (`bridge.ARRIVAL_CLOCK`), and a retraction re-stamps the queue entry only."""
        from sglang.srt.managers.schedule_batch import Req
        from sglang.srt.observability.req_time_stats import SchedulerReqTimeStats

        from sglang_duet.runtime import bridge

        assert "self.time_stats.set_scheduler_recv_time()" in src(Req)
        assert "time.perf_counter()" in src(SchedulerReqTimeStats.set_scheduler_recv_time)
        assert bridge.ARRIVAL_CLOCK.__name__ == "perf_counter"
        stats = SchedulerReqTimeStats()
        stats.set_scheduler_recv_time(5.0)
        stats.set_wait_queue_entry_time(6.0)
        stats.set_wait_queue_entry_time(9.0)  # retracted, queued again
        assert (stats.scheduler_recv_time, stats.wait_queue_entry_time) == (5.0, 9.0)

    def test_the_kv_room_the_prefill_adder_counts(self, sched_mod):
        """`bridge.free_kv_tokens` counts as `PrefillAdder.rem_total_tokens` does: free plus
        evictable slots less each running request's clipped output times the new-token ratio."""
        from sglang.srt.managers.schedule_policy import PrefillAdder

        from sglang_duet.runtime import patches

        assert patches.clip_max_new_tokens() > 0
        offset = src(PrefillAdder._get_running_request_total_token_offset)
        assert "CLIP_MAX_NEW_TOKENS" in offset and "self.new_token_ratio" in offset
        assert "len(req.output_ids)" in offset
        rem = src(PrefillAdder.rem_total_tokens.fget)
        assert "self.token_to_kv_pool_allocator.available_size()" in rem
        assert "self.tree_cache.evictable_size()" in rem
        assert "self.token_to_kv_pool_allocator.full_available_size()" in rem  # hybrid SWA
        assert "self.tree_cache.full_evictable_size()" in rem
        assert "self.rem_total_token_offset = num_mixed_decode_tokens" in src(PrefillAdder)
        # `bridge.kv_held`: each waiting request's charge and the comparison that holds it
        add = src(PrefillAdder.add_one_req)
        assert "total_tokens = cand_extend_input_len + max_new + self.page_size" in add
        assert "if total_tokens >= self.rem_total_tokens:" in add
        assert "len(req.output_ids)" in add and "CLIP_MAX_NEW_TOKENS" in add
        from sglang.srt.managers.scheduler_components.new_token_ratio_tracker import (
            NewTokenRatioTracker,
        )

        assert "self.new_token_ratio_tracker.current," in src(sched_mod.Scheduler)
        assert "self.max_total_num_tokens" in src(sched_mod.Scheduler)  # `bridge.kv_use`
        assert "self.current" in src(NewTokenRatioTracker)

    def test_server_args_fields(self):
        from sglang.srt.server_args import ServerArgs

        names = {f.name for f in dataclasses.fields(ServerArgs)}
        for name in ("attention_backend", "decode_attention_backend", "prefill_attention_backend",
                     "mem_fraction_static", "disable_cuda_graph", "cuda_graph_config",
                     "chunked_prefill_size", "enable_mixed_chunk", "tp_size", "enable_metrics"):
            assert name in names, name
        assert "max_bs * 2" in src(ServerArgs.reserve_for_graph_mb)

    def test_xgrammar_needs_cuda_and_the_backend_choices(self):
        """Why the CPU settings pick llguidance (cpu.py): xgrammar's mask needs CUDA."""
        import sglang.srt.constrained.xgrammar_backend as xg
        from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES

        assert "pin_memory=True" in src(xg._allocate_token_bitmask)
        assert "Unsupported device" in src(xg.XGrammarGrammar.apply_vocab_mask)
        assert {"xgrammar", "llguidance", "outlines"} <= set(GRAMMAR_BACKEND_CHOICES)

    def test_model_bounds_the_index_checks_read(self):
        from sglang.srt.configs.model_config import ModelConfig
        from sglang.srt.managers.tokenizer_manager import TokenizerManager

        assert "self.model_config = " in src(TokenizerManager)
        body = src(ModelConfig)
        assert "self.vocab_size" in body and "self.hidden_size" in body

    def test_flashinfer_plans_into_host_buffers(self):
        """Why look-ahead is forced to 1 with FlashInfer: each decode step plans on the host."""
        from sglang.srt.layers.attention import flashinfer_backend

        assert "call_begin_forward" in src(flashinfer_backend)
