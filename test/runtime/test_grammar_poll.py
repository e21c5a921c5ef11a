"""DuetScheduler's grammar-queue poll without a server (#24 item 1): before each plan, requests
whose grammar is ready (or failed) join the waiting queue, so the policy plans their prefill even
on an idle server; the prefill step that forms the plan does not poll (and wait) a second time."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from sglang_duet.args import DuetArgs
from sglang_duet.policy import BatchPlan, PrefillChunk
from sglang_duet.runtime import scheduler as sched_mod
from sglang_duet.runtime.scheduler import DuetScheduler


def req(rid, prompt=8):
    return NS(rid=rid, origin_input_ids=[1] * prompt, output_ids=[], prefix_indices=None,
              sampling_params=NS(max_new_tokens=16), grammar=None, finished=lambda: False)


class Grammars:
    """SGLang's GrammarManager as the loop uses it: compiled requests come out once."""

    def __init__(self, ready, compiling=()):
        self.ready, self.compiling, self.polls = list(ready), list(compiling), 0

    def has_waiting_grammars(self):
        return bool(self.ready or self.compiling)

    def get_ready_grammar_requests(self):
        self.polls += 1
        out, self.ready = self.ready, []
        return out


class Policy:
    token_budget = 64

    def __init__(self):
        self.seen = []

    def plan(self, decodes, waiting, backlog=False, kv_held=False, kv_use=0.0):
        self.seen.append([w.rid for w in waiting])
        if not waiting:
            return BatchPlan.idle()
        chunk = PrefillChunk(waiting[0].rid, 0, waiting[0].prompt_len)
        return BatchPlan.aggregated((), (chunk,), 132)


def scheduler(grammars):
    s = NS(grammar_manager=grammars, waiting_queue=[], chunked_req=None, duet_policy=Policy(),
           policy=NS(calc_priority=lambda *a: None), ps=NS(tp_size=1, tp_rank=0),
           running_batch=NS(reqs=[]), last_batch=None, duet_args=DuetArgs(),
           is_mixed_chunk=False, chunked_prefill_size=64, max_prefill_tokens=64, page_size=1,
           token_to_kv_pool_allocator=NS(available_size=lambda: 4096), max_total_num_tokens=4096,
           tree_cache=NS(evictable_size=lambda: 0), new_token_ratio_tracker=NS(current=0.7),
           duet_admission=None)  # arrival order: the admission order has tests of its own
    s._duet_knobs = (False, 64, 64)
    s._add_request_to_queue = s.waiting_queue.append
    for name in ("_admit_ready_grammars", "_order_waiting", "_decide", "_form_prefill"):
        setattr(s, name, getattr(DuetScheduler, name).__get__(s))
    # SGLang's get_next_batch_to_run calls the prefill step once (swapped in by _next_step).
    s.get_new_batch_prefill = None
    s.get_next_batch_to_run = lambda running, last: s.get_new_batch_prefill(running)
    return s


@pytest.fixture
def sglang_prefill(monkeypatch):
    """Stands in for Scheduler.get_new_batch_prefill: records what it would have polled."""
    calls = []

    def prefill(self, running):
        calls.append({"grammar_poll": self.grammar_manager.has_waiting_grammars(),
                      "waiting": [r.rid for r in self.waiting_queue]})
        return sched_mod.NextBatchPlan(batch_to_run="prefill-batch", running_batch=running)

    monkeypatch.setattr(sched_mod.Scheduler, "get_new_batch_prefill", prefill)
    return calls


def test_a_lone_compiled_request_is_planned_on_an_idle_server(sglang_prefill):
    g = Grammars([req("json-1")])
    s = scheduler(g)
    step = DuetScheduler._next_step(s)
    assert s.duet_policy.seen == [["json-1"]]  # the policy saw it before planning
    assert step.batch == "prefill-batch" and step.decision.plan.num_prefill_tokens == 8
    assert g.polls == 1
    assert sglang_prefill == [{"grammar_poll": False, "waiting": ["json-1"]}]  # no second poll
    assert g.has_waiting_grammars() is False


def test_a_failed_grammar_is_planned_too(sglang_prefill):
    """SGLang aborts a request whose grammar failed (a 1-token prompt carrying its 400); it
    must reach a prefill to be answered."""
    g = Grammars([req("bad-regex", prompt=1)])
    s = scheduler(g)
    DuetScheduler._next_step(s)
    assert s.duet_policy.seen == [["bad-regex"]] and sglang_prefill[0]["waiting"] == ["bad-regex"]


def test_still_compiling_waits_without_a_plan(sglang_prefill):
    g = Grammars([], compiling=[req("slow")])
    s = scheduler(g)
    step = DuetScheduler._next_step(s)
    assert step.batch is None and step.decision.plan.mode == "idle"
    assert g.polls == 1 and sglang_prefill == []
    assert g.has_waiting_grammars()  # polled again next iteration (SGLang's loop does not sleep)


def test_no_grammar_queue_no_poll(sglang_prefill):
    g = Grammars([])
    s = scheduler(g)
    s.waiting_queue.append(req("plain"))
    DuetScheduler._next_step(s)
    assert g.polls == 0 and s.duet_policy.seen == [["plain"]]
