"""DuetScheduler: SGLang's Scheduler, executing one DuetPolicy BatchPlan per iteration.

The loop is SGLang's non-overlap loop with one change of shape: each iteration the policy plans
over SGLang's running batch and waiting queue, and the plan picks how SGLang's own batch
machinery runs it:

* ``aggregated``  -> SGLang's mixed chunked-prefill batch, with the adder's budget set to the
  plan's tokens so that it forms exactly the plan's chunks;
* ``spatial``     -> a prefill-only batch (same budget rule) plus the running decode batch:
  decode step 0 is launched first, then the prefill, then look-ahead steps 1..k-1, each phase on
  its partition stream with state of its own (`phases`: attention backends, decode graphs
  captured on the partition); results are processed after all are launched. Each decode step
  is a whole host-side `run_batch`, so the prefill waits for one step's host time, not k
  (`latency.reference.host_seconds`, ``after``). With no partition backend (CPU) the phases run
  one after the other on the same device;
* ``decode_only`` -> SGLang's decode step; prefill waits.

The plan's path is explicit: `_decide` returns a `Decision` (the plan and its look-ahead, the
same on every TP rank), `_next_step` returns it with the batch SGLang formed for it, and the
loop hands it to the step that executes it.
"""

from __future__ import annotations

import logging
import time
from typing import NamedTuple

from sglang.srt.managers.schedule_batch import ScheduleBatch
from sglang.srt.managers.scheduler import Scheduler
from sglang.srt.utils.common import DynamicGradMode

from sglang_duet.args import DuetArgs
from sglang_duet.policy import BatchPlan
from sglang_duet.runtime import bridge, lookahead, patches, tp_groups
from sglang_duet.runtime.components import build_components
from sglang_duet.runtime.metrics import DuetMetrics
from sglang_duet.runtime.phases import PhaseRunners

try:  # moved between SGLang releases; only the type is needed
    from sglang.srt.managers.schedule_batch import NextBatchPlan
except ImportError:  # pragma: no cover
    from sglang.srt.managers.scheduler import NextBatchPlan

logger = logging.getLogger(__name__)


class Decision(NamedTuple):
    """One iteration's plan and the decode steps its spatial decode runs (TP rank 0's), and the
    permutation rank 0 put its waiting queue in (`_order_waiting`; None: unchanged)."""

    plan: BatchPlan
    lookahead: lookahead.Lookahead
    order: tuple[int, ...] | None = None


class Step(NamedTuple):
    """What `_next_step` returns: SGLang's batch to run (None: idle) and the decision."""

    batch: ScheduleBatch | None
    decision: Decision | None


class SpatialRun(NamedTuple):
    """What `_step_spatial` measured: one decode step's and the prefill's seconds (None when
    the phases overlapped on partition streams), surplus tokens dropped, decode steps run."""

    decode_s: float | None
    prefill_s: float | None
    discarded: int
    steps: int


class DuetScheduler(Scheduler):
    """Built through `DuetScheduler.configured(duet_args)` (SGLang constructs the class)."""

    duet_args: DuetArgs = DuetArgs()

    @classmethod
    def configured(cls, duet_args: DuetArgs) -> type[DuetScheduler]:
        """A subclass bound to `duet_args`, for SGLang's run_scheduler_process to construct."""
        return type(cls.__name__, (cls,), {"duet_args": duet_args, "__module__": cls.__module__})

    def __init__(self, server_args, port_args, gpu_id: int, *args, **kwargs):
        super().__init__(server_args, port_args, gpu_id, *args, **kwargs)
        sa = self.server_args
        budget = self.chunked_prefill_size
        if budget is None or budget <= 0:
            budget = self.max_prefill_tokens
        runner = self.model_worker.model_runner
        parts = build_components(
            self.duet_args,
            hf_config=runner.model_config.hf_config,
            tp_size=sa.tp_size,
            device=self.device,
            gpu_id=gpu_id,
            token_budget=budget,
            cuda_graphs=runner.decode_cuda_graph_runner is not None,
            agree=self._agree if self.ps.tp_size > 1 else None,  # every rank the same splits
        )
        if self.ps.tp_size > 1:  # before any capture: a lone fallback must not hang a barrier
            per_rank = tp_groups.gather((parts.backend_name, parts.graph_sizes), self.tp_cpu_group)
            tp_groups.require_same(per_rank, "the partition backend and decode graph sizes")
        self.duet_policy = parts.policy
        self.duet_admission = parts.admission
        self.duet_partitions = parts.partitions
        self.duet_phases = PhaseRunners.build(runner, parts.partitions, parts.graph_sizes)
        self.duet_own_prefill_group = (
            parts.partitions is not None and patches.has_prefill_tp_group()
        )
        if self.duet_own_prefill_group:
            tp_groups.warm_up_prefill_group(self.device)
        labels = {"tp_rank": str(self.ps.tp_rank), "dp_rank": str(self.ps.dp_rank or 0)}
        self.duet_metrics = DuetMetrics(bool(sa.enable_metrics), labels, self.duet_args.plan_log)
        self._duet_knobs = (self.is_mixed_chunk, self.chunked_prefill_size, self.max_prefill_tokens)
        backend = lookahead.decode_attention_backend(sa)
        if backend in lookahead.HOST_PLANNED_BACKENDS and self.duet_args.max_lookahead > 1:
            logger.warning("duet: look-ahead forced to 1 with --attention-backend %s (%s)",
                           backend, lookahead.REASONS["flashinfer"])
        logger.info(
            "DuetScheduler: mode=%s tbt_slo=%.1fms budget=%d hardware=%s backend=%s menu=%s",
            self.duet_args.mode, self.duet_args.tbt_slo_ms, budget, parts.hardware.name,
            parts.backend_name, list(parts.policy.menu.decode_sizes),
        )

    def _agree(self, value):
        """`value` of every TP rank, in rank order (over SGLang's CPU TP group)."""
        return tp_groups.gather(value, self.tp_cpu_group)

    # ---- planning -------------------------------------------------------------------------

    def _order_waiting(self) -> tuple[int, ...] | None:
        """Put SGLang's waiting queue (already sorted by its ``calc_priority``) in the duet
        admission order (``--duet-admission``, `policy.admission.Admission`), in place; returns
        the permutation applied (None: none). The request being chunked is not in the queue and
        stays first (SGLang continues it before any other). Ordered even while that request
        takes the whole budget: SGLang's prefill adder still visits the queue's head then
        (`Scheduler.get_new_batch_prefill` refreshes its prefix match, and a KV shortfall on it
        marks the batch full), so the head must be the order's. Decided on TP rank 0 only: the
        arrival stamps and the clock differ by rank, and every rank must form the same prefill,
        so the others apply rank 0's permutation when the decision reaches them (`_decide`)."""
        queue, admission = self.waiting_queue, self.duet_admission
        if admission is None or len(queue) < 2 or self.ps.tp_rank != 0:
            return None
        perm = admission.order(bridge.admission_candidates(queue), bridge.ARRIVAL_CLOCK())
        if all(i == k for k, i in enumerate(perm)):
            return None
        queue[:] = [queue[i] for i in perm]
        return tuple(perm)

    def _decide(self, running: ScheduleBatch, order: tuple[int, ...] | None = None
                ) -> Decision:
        """The policy's plan for this iteration and its look-ahead, decided on TP rank 0 and
        broadcast together, so that every rank runs the same plan and the same steps; with them
        ``order``, the permutation rank 0 applied to its waiting queue, which the other ranks
        apply to theirs."""
        decodes, waiting = bridge.policy_inputs(running.reqs, self.waiting_queue, self.chunked_req,
                                                self.duet_policy.token_budget)
        budget = self.duet_policy.token_budget - len(decodes)
        slots = bridge.free_slots(self)  # the allocator's and prefix cache's, read once
        held = bridge.kv_held(waiting, bridge.free_kv_tokens(self, running.reqs, slots), budget,
                              self.page_size, patches.clip_max_new_tokens(),
                              self.chunked_req is not None)
        claimed = bridge.claimed_tokens(waiting, self.duet_policy.token_budget)
        use = bridge.kv_use(self, claimed, slots)
        plan = self.duet_policy.plan(decodes, waiting, bridge.backlog(waiting, budget), held, use)
        steps = lookahead.Lookahead(1)
        if plan.mode == "spatial":
            steps = lookahead.max_safe_lookahead(
                self, running, plan.lookahead, plan.num_prefill_tokens, step0_allocated=False
            )
        decision = Decision(plan, steps, order)
        if self.ps.tp_size > 1:
            decision = tp_groups.broadcast_from_first(
                decision, self.tp_cpu_group, self.tp_group.first_rank
            )
            if self.ps.tp_rank != 0 and decision.order is not None:
                queue = self.waiting_queue
                if len(queue) != len(decision.order):
                    raise RuntimeError(f"TP rank {self.ps.tp_rank} has {len(queue)} waiting "
                                       f"requests, rank 0 ordered {len(decision.order)}")
                queue[:] = [queue[i] for i in decision.order]
        return decision

    def _form_prefill(self, running: ScheduleBatch, plan: BatchPlan) -> NextBatchPlan:
        """SGLang's prefill adder forms the plan's prefill, its budget set to exactly the plan's
        tokens (mixed with the running decodes for `aggregated`)."""
        tokens = plan.num_prefill_tokens
        if plan.mode in ("decode_only", "idle") or tokens == 0:
            return NextBatchPlan(batch_to_run=None, running_batch=running)
        mixed = plan.mode == "aggregated" and bool(plan.decode_rids)
        budget = tokens + (len(running.reqs) if mixed else 0)
        self.is_mixed_chunk = mixed
        self.chunked_prefill_size = budget
        self.max_prefill_tokens = budget
        try:
            with patches.priority_already_computed(self.policy), \
                    patches.grammar_queue_already_polled(self.grammar_manager):
                return Scheduler.get_new_batch_prefill(self, running)
        finally:
            self.is_mixed_chunk, self.chunked_prefill_size, self.max_prefill_tokens = (
                self._duet_knobs
            )

    def _admit_ready_grammars(self) -> None:
        """Move requests whose grammar finished compiling (or failed: they carry their abort)
        from SGLang's grammar queue to the waiting queue, as SGLang's prefill step does first.
        Done before planning, every iteration, so that the policy sees them: a lone constrained
        request on an idle server would otherwise wait for some other request's prefill."""
        grammars = self.grammar_manager
        if grammars.has_waiting_grammars():
            for req in grammars.get_ready_grammar_requests():
                self._add_request_to_queue(req)

    def _next_step(self) -> Step:
        """SGLang's get_next_batch_to_run, with its prefill step replaced by plan-then-form:
        SGLang merges the last prefill into the running batch first, then asks for a prefill."""
        decisions: list[Decision] = []

        def plan_then_form(running: ScheduleBatch) -> NextBatchPlan:
            self._admit_ready_grammars()
            order = None
            if self.waiting_queue:
                self.policy.calc_priority(self.waiting_queue, running)
                order = self._order_waiting()
            decisions.append(self._decide(running, order))
            return self._form_prefill(running, decisions[-1].plan)

        with patches.swapped(self, get_new_batch_prefill=plan_then_form):
            nb = self.get_next_batch_to_run(self.running_batch, self.last_batch)
        self.running_batch = nb.running_batch
        return Step(nb.batch_to_run, decisions[-1] if decisions else None)

    # ---- execution ------------------------------------------------------------------------

    def _step_spatial(self, prefill: ScheduleBatch, decision: Decision) -> SpatialRun:
        """Decode step 0, the prefill, decode steps 1..k-1, launched in that order (the two
        streams are independent), then processed."""
        decode = self.update_running_batch(self.running_batch)
        self.running_batch = decode
        phases, s_d = self.duet_phases, decision.plan.sms_decode
        if decode is None or decode.is_empty():  # nothing to overlap: whole device, SGLang's way
            self.process_batch_result(prefill, self.run_batch(prefill))
            return SpatialRun(None, None, 0, 0)
        k = decision.lookahead.steps
        t0 = time.perf_counter()
        mark = phases.marker(s_d)
        with phases.decode(s_d):
            launched = lookahead.launch_first(self, decode, mark)
        t1 = time.perf_counter()
        with phases.prefill(s_d), patches.prefill_tp_group(self.duet_own_prefill_group,
                                                           phases.model_runner):
            result_p = self.run_batch(prefill)
        t2 = time.perf_counter()
        with phases.decode(s_d):
            lookahead.launch_rest(self, launched, k, mark)
        # Decode results first, each step as soon as it is done (they need not wait for the
        # prefill, nor for later steps); without per-step marks, once the whole decode is.
        if mark is None:
            phases.join(s_d, 0)
        discarded = lookahead.process(self, launched, phases.wait)  # the last mark: all of it
        t3 = time.perf_counter()
        phases.join(s_d, 1)
        self.process_batch_result(prefill, result_p)
        t4 = time.perf_counter()
        if phases.partitions is not None:
            return SpatialRun(None, None, discarded, k)  # overlapped: the policy gets the total
        # Sequential execution (no partitions) lets each phase be timed on its own.
        return SpatialRun((t1 - t0 + t3 - t2) / k, t2 - t1 + t4 - t3, discarded, k)

    def _feedback(self, batch: ScheduleBatch, decision: Decision, run: SpatialRun,
                  measured_s: float) -> None:
        """Online correction and metrics for the iteration as it really ran."""
        plan = decision.plan
        if batch.forward_mode.is_decode() and plan.mode != "decode_only":
            plan = as_decode_only(plan)  # executed differently: no feedback
        elif plan.mode == "spatial" and run.steps == 0:
            pass  # its decodes had all finished: a whole-device prefill, not the split
        else:
            self.duet_policy.observe(plan, measured_s, run.decode_s, run.prefill_s)
        limited = decision.lookahead.reason if run.steps else ""
        self.duet_metrics.record(plan, measured_s, self.duet_args.tbt_slo_s, run.discarded,
                                 self.ps.tp_rank, run.steps, limited)

    @DynamicGradMode()
    def event_loop_normal(self):
        """SGLang's non-overlap loop shape, one Decision per iteration."""
        while not self.gracefully_exit:
            self.process_input_requests(self.request_receiver.recv_requests())
            if self._engine_paused:
                continue
            batch, decision = self._next_step()
            self.cur_batch_for_debug = batch
            if batch is None:
                self.on_idle()
                self.last_batch = None
                continue
            t0 = time.perf_counter()
            run = SpatialRun(None, None, 0, 0)
            spatial = decision is not None and decision.plan.mode == "spatial"
            if spatial and batch.forward_mode.is_extend():
                run = self._step_spatial(batch, decision)
            else:
                self.process_batch_result(batch, self.run_batch(batch))
            if decision is not None:
                self._feedback(batch, decision, run, time.perf_counter() - t0)
            self.last_batch = batch


def as_decode_only(plan: BatchPlan) -> BatchPlan:
    """SGLang ran decode although the plan had prefill (the adder admitted nothing, e.g. the KV
    pool is full): account the iteration as the decode-only step it was."""
    total = max(plan.sms_decode, plan.sms_decode + plan.sms_prefill * (plan.mode == "spatial"))
    return BatchPlan.decode_only(
        plan.decode_rids, total, plan.predicted_decode_s, plan.reason + "; prefill not admitted"
    )

