"""DuetScheduler's plan path without a server (CPU fakes): `_decide` returns the plan and its
look-ahead, TP rank 0's answer reaches every rank, the spatial step runs exactly the decided
steps, and start-up choices are compared across ranks."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace as NS

import pytest

from sglang_duet.args import DuetArgs
from sglang_duet.policy import BatchPlan, PrefillChunk
from sglang_duet.runtime import lookahead, tp_groups
from sglang_duet.runtime import scheduler as sched_mod
from sglang_duet.runtime.scheduler import Decision, DuetScheduler, SpatialRun, as_decode_only

CHUNK = (PrefillChunk("w", 0, 64),)


def req(rid):
    return NS(rid=rid, origin_input_ids=[1] * 8, output_ids=[2], prefix_indices=None,
              sampling_params=NS(max_new_tokens=100), grammar=None, finished=lambda: False)


class FakePolicy:
    token_budget = 8192

    def __init__(self, plan):
        self.plan_ = plan
        self.backlog = self.kv_held = self.kv_use = None

    def plan(self, decodes, waiting, backlog=False, kv_held=False, kv_use=0.0):
        self.backlog, self.kv_held, self.kv_use = backlog, kv_held, kv_use
        return self.plan_


def fake_sched(plan, tp_size=1, free=10_000, backend="fa3", waiting=(), evictable=0):
    running = NS(
        reqs=[req("a"), req("b")], return_logprob=False, return_hidden_states=False,
        spec_algorithm=NS(is_none=lambda: True),
        sampling_info=NS(penalizer_orchestrator=NS(is_required=False)),
    )
    s = NS(
        duet_policy=FakePolicy(plan), waiting_queue=list(waiting), chunked_req=None,
        ps=NS(tp_size=tp_size, tp_rank=0), tp_cpu_group="cpu-group", tp_group=NS(first_rank=0),
        server_args=NS(attention_backend=backend, decode_attention_backend=None), page_size=1,
        token_to_kv_pool_allocator=NS(available_size=lambda: free), max_total_num_tokens=20_000,
        tree_cache=NS(evictable_size=lambda: evictable), new_token_ratio_tracker=NS(current=0.5),
    )
    return s, running


def spatial(k=4):
    return BatchPlan.spatial(("a", "b"), CHUNK, 32, 100, k, 0.01, 0.03)


def test_decide_returns_the_plan_and_its_lookahead():
    s, running = fake_sched(spatial(4))
    got = DuetScheduler._decide(s, running)
    assert isinstance(got, Decision) and got.plan == spatial(4)
    assert got.lookahead == lookahead.Lookahead(4, "")
    assert not hasattr(s, "duet_plan")  # nothing left on the scheduler for a later method


@pytest.mark.parametrize("free, evictable, held", [(1000, 0, True), (1000, 999, False),
                                                   (10_000, 0, False), (1109, 0, True),
                                                   (1110, 0, False)])
def test_the_policy_hears_whether_the_kv_pool_holds_a_prompt_back(free, evictable, held):
    """A waiting prompt of 999 tokens, 8 outputs and one page (1,008 slots) against the free and
    evictable slots less the running requests' reservation (2 x 99 remaining outputs x new-token
    ratio 0.5 = 99 slots) and their 2 mixed-decode tokens: held from 1,109 free slots down."""
    w = NS(rid="w", origin_input_ids=[1] * 999, output_ids=[], prefix_indices=None,
           sampling_params=NS(max_new_tokens=8), grammar=None, finished=lambda: False)
    s, running = fake_sched(BatchPlan.aggregated(("a", "b"), CHUNK, 132), free=free,
                            waiting=[w], evictable=evictable)
    DuetScheduler._decide(s, running)
    assert s.duet_policy.kv_held is held
    assert s.duet_policy.backlog is False  # 1000 tokens fit one iteration's budget
    # of the 20,000-slot pool, the admitted prompt's 999 tokens counted as claimed
    assert s.duet_policy.kv_use == pytest.approx(min(1.0, 1 - (free + evictable - 999) / 20_000))


def test_decide_with_flashinfer_forces_one_step():
    s, running = fake_sched(spatial(4), backend="flashinfer")
    assert DuetScheduler._decide(s, running).lookahead == lookahead.Lookahead(1, "flashinfer")


def test_non_spatial_plans_take_one_step():
    s, running = fake_sched(BatchPlan.aggregated(("a", "b"), CHUNK, 132))
    assert DuetScheduler._decide(s, running).lookahead.steps == 1


def test_tp_ranks_run_rank0s_decision(monkeypatch):
    """A non-first rank whose own KV pool would allow fewer steps still runs rank 0's k: plan
    and look-ahead travel in one broadcast."""
    rank0 = Decision(spatial(4), lookahead.Lookahead(4, ""))
    sent = []

    def broadcast(obj, group, src):
        sent.append((obj, group, src))
        return rank0

    monkeypatch.setattr(tp_groups, "broadcast_from_first", broadcast)
    s, running = fake_sched(spatial(4), tp_size=2, free=2)  # alone this rank would pick k=1
    got = DuetScheduler._decide(s, running)
    assert got == rank0
    assert sent[0][0].lookahead == lookahead.Lookahead(1, "kv_pool")  # its own, replaced
    assert sent[0][1:] == ("cpu-group", 0)


class FakePhases:
    partitions = None
    model_runner = None

    def __init__(self, log, marks=False):
        self.log, self.marks = log, marks

    def marker(self, s_d):
        return (lambda: "mark") if self.marks else None

    def wait(self, mark):
        self.log.append(("wait", mark))

    @contextlib.contextmanager
    def decode(self, s_d):
        self.log.append(("decode", s_d))
        yield

    @contextlib.contextmanager
    def prefill(self, s_d):
        self.log.append(("prefill", s_d))
        yield

    def join(self, s_d, side):
        self.log.append(("join", side))


@pytest.mark.parametrize("marks", [False, True])
def test_spatial_step_runs_exactly_the_decided_steps(monkeypatch, marks):
    """Decode step 0 launched first, then the prefill, then decode steps 1..k-1 (the prefill
    waits for one decode step's host work, not k); decode results per step when the phases
    mark steps (no join before them), else after one join of the decode stream."""
    log = []
    decode = NS(is_empty=lambda: False, reqs=[req("a")])
    s = NS(
        duet_phases=FakePhases(log, marks), duet_own_prefill_group=False,
        running_batch="running", update_running_batch=lambda rb: decode,
        run_batch=lambda b: log.append(("run", b)) or "result",
        process_batch_result=lambda b, r: log.append(("processed", b)),
    )

    def launch_first(sc, b, mark):
        log.append(("launch step 0", mark() if mark else None))
        return "la"

    def launch_rest(sc, la, k, mark):
        log.append(("launch steps 1..", k, la, mark() if mark else None))

    def process(sc, la, wait):
        wait("step0")
        log.append(("process", la))
        return 2

    monkeypatch.setattr(lookahead, "launch_first", launch_first)
    monkeypatch.setattr(lookahead, "launch_rest", launch_rest)
    monkeypatch.setattr(lookahead, "process", process)
    decision = Decision(spatial(4), lookahead.Lookahead(3, "kv_pool"))
    run = DuetScheduler._step_spatial(s, "prefill-batch", decision)
    assert isinstance(run, SpatialRun) and (run.steps, run.discarded) == (3, 2)
    m = "mark" if marks else None
    first = [("decode", 32), ("launch step 0", m), ("prefill", 32), ("run", "prefill-batch"),
             ("decode", 32), ("launch steps 1..", 3, "la", m)]
    joined = [] if marks else [("join", 0)]
    assert log[:len(first) + len(joined) + 2] == first + joined + [("wait", "step0"),
                                                                   ("process", "la")]
    assert log[-2:] == [("join", 1), ("processed", "prefill-batch")]


def test_configured_binds_the_args_without_a_module_global():
    a, b = DuetArgs(mode="spatial"), DuetArgs(mode="aggregated")
    cls_a, cls_b = DuetScheduler.configured(a), DuetScheduler.configured(b)
    assert (cls_a.duet_args.mode, cls_b.duet_args.mode) == ("spatial", "aggregated")
    assert issubclass(cls_a, DuetScheduler) and DuetScheduler.duet_args == DuetArgs()
    assert not hasattr(sched_mod, "DUET_ARGS")


def test_prefill_not_admitted_is_accounted_as_decode_only():
    plan = as_decode_only(spatial(4))
    assert (plan.mode, plan.sms_decode, plan.sms_prefill, plan.lookahead) == (
        "decode_only", 132, 0, 1)
    assert plan.predicted_total_s == 0.01 and plan.reason.endswith("prefill not admitted")


class TestRanksAgree:
    def test_same_passes(self):
        tp_groups.require_same([("green-ctx", (16, 64))] * 2, "x")

    def test_lone_fallback_fails_every_rank_with_both_answers(self):
        with pytest.raises(tp_groups.RanksDisagree) as err:
            tp_groups.require_same([("green-ctx", (16, 64)), ("none", ())], "the backend")
        msg = str(err.value)
        assert "rank 0: ('green-ctx', (16, 64))" in msg and "rank 1: ('none', ())" in msg


def test_prefill_communicator_warm_up_runs_on_the_prefill_group(monkeypatch):
    """The first collective of the prefill phase's communicator happens at start-up, with
    SGLang's get_tp_group() routed to it (NCCL connects lazily)."""
    import sglang.srt.distributed.parallel_state as ps
    import torch

    routed = []
    calls = []
    monkeypatch.setattr(ps, "set_pdmux_status", routed.append)
    monkeypatch.setattr(ps, "get_tp_group",
                        lambda: NS(all_reduce=lambda t: calls.append((list(routed), t.numel()))))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    tp_groups.warm_up_prefill_group("cpu")
    assert calls == [([True], 1)] and routed == [True, False]
