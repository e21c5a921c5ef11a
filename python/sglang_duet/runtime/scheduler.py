"""DuetScheduler: SGLang's Scheduler, executing one DuetPolicy BatchPlan per iteration.

The loop is SGLang's non-overlap loop with one change of shape: each iteration the policy plans
over SGLang's running batch and waiting queue, and the plan picks how SGLang's own batch
machinery runs it:

* ``aggregated``  -> SGLang's mixed chunked-prefill batch, with the adder's budget set to the
  plan's tokens so that it forms exactly the plan's chunks;
* ``spatial``     -> a prefill-only batch (same budget rule) plus the running decode batch: the
  decode side is launched first, k look-ahead steps back to back, then the prefill, each on its
  partition stream with state of its own (`phases`: attention backends, decode graphs captured
  on the partition); both results are processed after both are launched. With no partition
  backend (CPU) the two run one after the other on the same device;
* ``decode_only`` -> SGLang's decode step; prefill waits.
"""

from __future__ import annotations

import logging
import time

import torch
from sglang.srt.managers.schedule_batch import ScheduleBatch
from sglang.srt.managers.scheduler import Scheduler
from sglang.srt.utils.common import DynamicGradMode

from sglang_duet.args import DuetArgs
from sglang_duet.policy import BatchPlan
from sglang_duet.runtime import bridge, lookahead, tp_groups
from sglang_duet.runtime.components import build_components
from sglang_duet.runtime.metrics import DuetMetrics
from sglang_duet.runtime.phases import PhaseRunners

try:  # moved between SGLang releases; only the type is needed
    from sglang.srt.managers.schedule_batch import NextBatchPlan
except ImportError:  # pragma: no cover
    from sglang.srt.managers.scheduler import NextBatchPlan

logger = logging.getLogger(__name__)

DUET_ARGS: DuetArgs = DuetArgs()  # set by run_duet_scheduler_process before construction


class DuetScheduler(Scheduler):
    def __init__(self, server_args, port_args, gpu_id: int, *args, **kwargs):
        super().__init__(server_args, port_args, gpu_id, *args, **kwargs)
        self.duet_args = DUET_ARGS
        sa = self.server_args
        budget = self.chunked_prefill_size
        if budget is None or budget <= 0:
            budget = self.max_prefill_tokens
        runner = self.model_worker.model_runner
        parts = build_components(
            self.duet_args,
            model_path=sa.model_path,
            tp_size=sa.tp_size,
            device=self.device,
            gpu_id=gpu_id,
            token_budget=budget,
            cuda_graphs=runner.decode_cuda_graph_runner is not None,
        )
        self.duet_policy = parts.policy
        self.duet_partitions = parts.partitions
        self.duet_phases = PhaseRunners.build(runner, parts.partitions, parts.graph_sizes)
        labels = {"tp_rank": str(self.ps.tp_rank), "dp_rank": str(self.ps.dp_rank or 0)}
        self.duet_metrics = DuetMetrics(bool(sa.enable_metrics), labels, self.duet_args.plan_log)
        self.duet_plan: BatchPlan | None = None
        self._duet_knobs = (self.is_mixed_chunk, self.chunked_prefill_size, self.max_prefill_tokens)
        logger.info(
            "DuetScheduler: mode=%s tbt_slo=%.1fms budget=%d hardware=%s backend=%s menu=%s",
            self.duet_args.mode, self.duet_args.tbt_slo_ms, budget, parts.hardware.name,
            parts.backend_name, list(parts.policy.menu.decode_sizes),
        )

    # ---- planning -------------------------------------------------------------------------

    def _decide(self, running: ScheduleBatch) -> BatchPlan:
        decodes, waiting = bridge.policy_inputs(running.reqs, self.waiting_queue, self.chunked_req)
        budget = self.duet_policy.token_budget - len(decodes)
        plan = self.duet_policy.plan(decodes, waiting, bridge.backlog(waiting, budget))
        if self.ps.tp_size > 1:
            # Every rank must run the same plan; rank 0's online correction decides.
            box = [plan]
            torch.distributed.broadcast_object_list(
                box, src=self.tp_group.first_rank, group=self.tp_cpu_group
            )
            plan = box[0]
        return plan

    def get_new_batch_prefill(self, running_batch: ScheduleBatch) -> NextBatchPlan:
        """Called by get_next_batch_to_run once per iteration: plan, then let SGLang's prefill
        adder form the plan's prefill with its budget set to exactly the plan's tokens."""
        if self.waiting_queue:
            self.policy.calc_priority(self.waiting_queue, running_batch)
        plan = self._decide(running_batch)
        self.duet_plan = plan
        tokens = plan.num_prefill_tokens
        if plan.mode in ("decode_only", "idle") or tokens == 0:
            return NextBatchPlan(batch_to_run=None, running_batch=running_batch)
        mixed = plan.mode == "aggregated" and bool(plan.decode_rids)
        budget = tokens + (len(running_batch.reqs) if mixed else 0)
        self.is_mixed_chunk = mixed
        self.chunked_prefill_size = budget
        self.max_prefill_tokens = budget
        # The queue was prioritised (and prefix-matched) above for the plan; SGLang's adder
        # would do it again for the same queue, so skip that second pass this iteration.
        self.policy.calc_priority = _already_prioritised
        try:
            return super().get_new_batch_prefill(running_batch)
        finally:
            del self.policy.calc_priority
            self.is_mixed_chunk, self.chunked_prefill_size, self.max_prefill_tokens = (
                self._duet_knobs
            )

    # ---- execution ------------------------------------------------------------------------

    def _step_spatial(
        self, prefill: ScheduleBatch, plan: BatchPlan
    ) -> tuple[float | None, float | None, int, int]:
        """Decode (k look-ahead steps) and prefill, launched in that order, then processed.
        Returns (decode step s, prefill s, surplus tokens discarded, decode steps run); the
        phase times are None when the phases ran at the same time (partition streams)."""
        decode = self.update_running_batch(self.running_batch)
        self.running_batch = decode
        phases, s_d = self.duet_phases, plan.sms_decode
        if decode is None or decode.is_empty():  # nothing to overlap: whole device, SGLang's way
            self.process_batch_result(prefill, self.run_batch(prefill))
            return None, None, 0, 0
        k, why = lookahead.max_safe_lookahead(self, decode, plan.lookahead)
        if why and k < plan.lookahead:
            self.duet_metrics.lookahead_limited(why, plan.lookahead, k)
        t0 = time.perf_counter()
        with phases.decode(s_d):
            launched = lookahead.launch(self, decode, k)
        t1 = time.perf_counter()
        own_group = phases.partitions is not None and tp_groups.has_prefill_tp_group()
        with phases.prefill(s_d), tp_groups.prefill_tp_group(own_group):
            result_p = self.run_batch(prefill)
        t2 = time.perf_counter()
        phases.join(s_d, 0)  # decode results first: they need not wait for the prefill
        discarded = lookahead.process(self, launched)
        t3 = time.perf_counter()
        phases.join(s_d, 1)
        self.process_batch_result(prefill, result_p)
        t4 = time.perf_counter()
        if phases.partitions is not None:
            return None, None, discarded, k  # overlapped: the policy attributes the total
        # Sequential execution (no partitions) lets each phase be timed on its own.
        return (t1 - t0 + t3 - t2) / k, t2 - t1 + t4 - t3, discarded, k

    @DynamicGradMode()
    def event_loop_normal(self):
        """SGLang's non-overlap loop shape, one BatchPlan per iteration."""
        while not self.gracefully_exit:
            self.process_input_requests(self.request_receiver.recv_requests())
            if self._engine_paused:
                continue
            self.duet_plan = None
            nb = self.get_next_batch_to_run(self.running_batch, self.last_batch)
            self.running_batch = nb.running_batch
            batch = nb.batch_to_run
            self.cur_batch_for_debug = batch
            plan = self.duet_plan
            if batch is None:
                self.on_idle()
                self.last_batch = None
                continue
            t0 = time.perf_counter()
            decode_s = prefill_s = None
            discarded = steps = 0
            if plan is not None and plan.mode == "spatial" and batch.forward_mode.is_extend():
                decode_s, prefill_s, discarded, steps = self._step_spatial(batch, plan)
            else:
                self.process_batch_result(batch, self.run_batch(batch))
            measured = time.perf_counter() - t0
            if plan is not None:
                if batch.forward_mode.is_decode() and plan.mode != "decode_only":
                    plan = _as_decode_only(plan)  # executed differently: no feedback
                elif plan.mode == "spatial" and steps == 0:
                    pass  # its decodes had all finished: a whole-device prefill, not the split
                else:
                    self.duet_policy.observe(plan, measured, decode_s, prefill_s)
                self.duet_metrics.record(
                    plan, measured, self.duet_policy.tbt_slo_s, discarded, self.ps.tp_rank, steps
                )
            self.last_batch = batch


def _already_prioritised(*_args, **_kwargs) -> None:
    """Stands in for SchedulePolicy.calc_priority inside the adder pass (see above)."""


def _as_decode_only(plan: BatchPlan) -> BatchPlan:
    """SGLang ran decode although the plan had prefill (the adder admitted nothing, e.g. the KV
    pool is full): account the iteration as the decode-only step it was."""
    total = max(plan.sms_decode, plan.sms_decode + plan.sms_prefill * (plan.mode == "spatial"))
    return BatchPlan(
        "decode_only", plan.decode_rids, (), total, 0, 1, plan.predicted_decode_s,
        plan.predicted_decode_s, 0.0, plan.reason + "; prefill not admitted",
    )
