"""DuetScheduler's admission hook without a server (#48): after SGLang's calc_priority the
waiting queue is put in the duet order in place (stand-in Reqs), the policy plans over that
order, ``--duet-admission fcfs`` leaves SGLang's order alone, and with TP > 1 rank 0's
permutation is what every rank applies."""

from __future__ import annotations

import concurrent.futures as cf
import json
import time
from types import SimpleNamespace as NS

import pytest

from helpers.reference import prompts
from sglang_duet.args import DuetArgs
from sglang_duet.latency import LatencyModel, get_hardware, get_model
from sglang_duet.local_server import http_json
from sglang_duet.policy import BatchPlan
from sglang_duet.policy.admission import Admission
from sglang_duet.runtime import bridge, lookahead, tp_groups
from sglang_duet.runtime.components import build_admission
from sglang_duet.runtime.scheduler import Decision, DuetScheduler

NOW = 1000.0


def req(rid, prompt, arrival, prefix=0, outputs=0):
    """The fields an SGLang Req has that the bridge reads (time_stats: perf_counter seconds)."""
    return NS(rid=rid, origin_input_ids=[1] * prompt, output_ids=[2] * outputs,
              prefix_indices=[0] * prefix, sampling_params=NS(max_new_tokens=16),
              time_stats=NS(scheduler_recv_time=arrival, wait_queue_entry_time=arrival + 0.5),
              finished=lambda: False)


@pytest.fixture(scope="module")
def latency():
    return LatencyModel(get_hardware("h100-sxm"), get_model("qwen3-8b"))


def admission(latency, order, **kw):
    return build_admission(DuetArgs(admission=order, **kw), latency)


class RecordingPolicy:
    token_budget = 8192

    def __init__(self):
        self.waiting = None

    def plan(self, decodes, waiting, backlog=False, kv_held=False, kv_use=0.0):
        self.waiting = [w.rid for w in waiting]
        return BatchPlan.idle()


def sched(queue, adm, tp_size=1, tp_rank=0):
    return NS(waiting_queue=queue, duet_admission=adm, chunked_req=None,
              duet_policy=RecordingPolicy(), ps=NS(tp_size=tp_size, tp_rank=tp_rank),
              tp_cpu_group="cpu", tp_group=NS(first_rank=0), page_size=1,
              server_args=NS(attention_backend="fa3", decode_attention_backend=None),
              token_to_kv_pool_allocator=NS(available_size=lambda: 10**6),
              tree_cache=NS(evictable_size=lambda: 0), max_total_num_tokens=10**6,
              new_token_ratio_tracker=NS(current=0.5))


def burst():
    """A long prompt first, then three short ones a moment later (arrival order)."""
    return [req("long", 60_000, NOW - 1.0), req("s1", 300, NOW - 0.9),
            req("s2", 200, NOW - 0.8), req("s3", 400, NOW - 0.7)]


@pytest.fixture
def clock(monkeypatch):
    monkeypatch.setattr(bridge, "ARRIVAL_CLOCK", lambda: NOW)


def rids(queue):
    return [r.rid for r in queue]


def test_sjf_puts_the_short_prompts_first_in_place(latency, clock):
    queue = burst()
    s = sched(queue, admission(latency, "sjf"))
    perm = DuetScheduler._order_waiting(s)
    assert s.waiting_queue is queue  # SGLang's own list, reordered
    assert rids(queue) == ["s2", "s1", "s3", "long"]
    assert perm == (2, 1, 3, 0)


def test_the_policy_plans_over_the_admission_order(latency, clock):
    s = sched(burst(), admission(latency, "sjf"))
    order = DuetScheduler._order_waiting(s)
    decision = DuetScheduler._decide(s, NS(reqs=[]), order)
    assert s.duet_policy.waiting == ["s2", "s1", "s3", "long"]
    assert decision.order == order


def test_deadline_lets_the_prompts_that_can_make_it_go_first(latency, clock):
    """With a 1.5 s TTFT SLO the long prompt (about 3.7 s of prefill) cannot make its deadline
    and takes every short one past theirs: it yields; the short ones keep arrival order."""
    queue = burst()
    s = sched(queue, admission(latency, "deadline", ttft_slo_ms=1500.0))
    assert DuetScheduler._order_waiting(s) == (1, 2, 3, 0)
    assert rids(queue) == ["s1", "s2", "s3", "long"]


def test_fcfs_leaves_sglangs_order(latency, clock):
    assert admission(latency, "fcfs") is None
    queue = burst()
    queue.reverse()  # whatever order SGLang's --schedule-policy left
    before = rids(queue)
    assert DuetScheduler._order_waiting(sched(queue, None)) is None
    assert rids(queue) == before


def test_a_request_past_the_aging_bound_goes_first(latency, clock):
    """sjf, SLO 1 s, aging 3: the long prompt waited 3.5 s, past 3 x 1 s."""
    queue = [req("s1", 300, NOW - 0.5), req("long", 60_000, NOW - 3.5), req("s2", 200, NOW)]
    s = sched(queue, admission(latency, "sjf", ttft_slo_ms=1000.0, aging=3.0))
    DuetScheduler._order_waiting(s)
    assert rids(queue) == ["long", "s2", "s1"]


def test_unchanged_order_returns_none(latency, clock):
    queue = [req("s1", 100, NOW - 2), req("s2", 200, NOW - 1)]
    assert DuetScheduler._order_waiting(sched(queue, admission(latency, "sjf"))) is None


def test_candidates_count_what_the_policy_counts():
    """A retracted request re-prefills its outputs; the prefix SGLang matched is cached, at most
    prompt - 1; the scheduler's receive stamp is the arrival, the queue entry only without it."""
    r = req("r", 100, 7.0, prefix=40, outputs=20)
    full = req("f", 50, 8.0, prefix=50)
    unstamped = req("u", 10, 0.0)
    assert bridge.admission_candidates([r, full, unstamped]) == [
        (7.0, 120, 40), (8.0, 50, 49), (0.5, 10, 0)]
    state = bridge.waiting_state(r)
    assert (state.prompt_len, state.computed) == (120, 40)
    assert bridge.arrival_s(r) == 7.0 and bridge.arrival_s(unstamped) == 0.5


def test_only_tp_rank0_orders_and_every_rank_applies_its_permutation(latency, clock,
                                                                      monkeypatch):
    rank0 = Decision(BatchPlan.idle(), lookahead.Lookahead(1), (3, 2, 1, 0))
    monkeypatch.setattr(tp_groups, "broadcast_from_first", lambda obj, group, src: rank0)
    queue = burst()
    s = sched(queue, admission(latency, "sjf"), tp_size=2, tp_rank=1)
    assert DuetScheduler._order_waiting(s) is None  # rank 1 does not decide
    assert rids(queue) == ["long", "s1", "s2", "s3"]
    assert DuetScheduler._decide(s, NS(reqs=[]), None) == rank0
    assert rids(queue) == ["s3", "s2", "s1", "long"]  # rank 0's permutation


def test_components_fit_the_admission_once(latency):
    adm = admission(latency, "deadline", ttft_slo_ms=2000.0, ttft_per_token_ms=0.5, aging=2.0)
    assert isinstance(adm, Admission)
    assert (adm.cfg.order, adm.cfg.ttft_slo_s, adm.cfg.per_token_s, adm.cfg.aging) == (
        "deadline", 2.0, 0.0005, 2.0)
    assert 0 < adm.seconds(300, 0) < adm.seconds(60_000, 0)


# ---- a real server on this CPU: the order it really admits ------------------------------------


def _waiting(srv) -> int:
    return sum(x["num_waiting_reqs"] for x in http_json(srv.url + "/v1/loads")["loads"])


def _admitted(srv, order: str, tmp_path) -> tuple[list[str], dict[str, list[int]]]:
    """With one running request at a time, a blocker decodes while a long prompt and then three
    short ones queue (each seen queued before the next is sent); the blocker is aborted and the
    queue drains one request at a time. Returns the rids in the order they decoded (the plan log's
    ``decode_rids``, which holds the one running request) and each request's output ids."""
    plan = str(tmp_path / f"plan-{order}")
    srv = srv(["--max-running-requests", "1", "--duet-admission", order, "--duet-plan-log", plan])
    long_p, *shorts = prompts(4, [600, 20, 24, 28], seed=3)
    jobs = [("long", long_p)] + [(f"s{i}", p) for i, p in enumerate(shorts)]

    def send(rid, ids, n):
        body = {"rid": rid, "input_ids": ids,
                "sampling_params": {"max_new_tokens": n, "temperature": 0.0, "ignore_eos": True}}
        return http_json(srv.url + "/generate", body, timeout=600)

    def wait_for(cond, what):
        deadline = time.time() + 120
        while not cond():
            assert time.time() < deadline, what
            time.sleep(0.05)

    with cf.ThreadPoolExecutor(len(jobs) + 1) as ex:
        blocker = ex.submit(send, "blocker", prompts(1, [8], seed=4)[0], 3500)
        wait_for(lambda: "blocker" in open(plan + ".tp0.dp0").read(), "the blocker runs")
        futures = {}
        for k, (rid, ids) in enumerate(jobs, 1):
            futures[rid] = ex.submit(send, rid, ids, 3)
            wait_for(lambda k=k: _waiting(srv) == k, f"{rid} queued behind the blocker")
        assert not blocker.done()  # all four queued while it still ran
        http_json(srv.url + "/abort_request", {"rid": "blocker"})
        outputs = {rid: f.result()["output_ids"] for rid, f in futures.items()}
        blocker.result()
    seen: list[str] = []
    with open(plan + ".tp0.dp0") as f:
        for line in f:
            for rid in json.loads(line)["decode_rids"]:
                if rid in futures and rid not in seen:  # not the blocker nor a warm-up
                    seen.append(rid)
    return seen, outputs


@pytest.mark.server
def test_server_admits_short_prompts_first_with_sjf_and_in_arrival_order_with_fcfs(
        fresh_server, tmp_path):
    """#48 item 6's CPU check: the runtime really reorders SGLang's queue. Greedy, fixed output
    lengths; no timing thresholds (the waits only sequence the arrivals)."""
    sjf, out_sjf = _admitted(fresh_server, "sjf", tmp_path)
    fcfs, out_fcfs = _admitted(fresh_server, "fcfs", tmp_path)
    assert sjf == ["s0", "s1", "s2", "long"]
    assert fcfs == ["long", "s0", "s1", "s2"]
    assert out_sjf == out_fcfs  # the order changes when, not what, each request gets
