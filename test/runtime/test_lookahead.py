"""How many look-ahead steps a spatial decode may take, decided with the plan (CPU fakes)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace as NS

import pytest
import torch

from sglang_duet.runtime.lookahead import (
    REASONS,
    Lookahead,
    launch,
    launch_first,
    launch_rest,
    max_safe_lookahead,
    process,
)


def req(max_new=100, out=1, finished=False, grammar=None):
    return NS(
        sampling_params=NS(max_new_tokens=max_new), output_ids=[0] * out, grammar=grammar,
        finished=lambda: finished,
    )


def batch(reqs, logprob=False, penalties=False, spec=False):
    return NS(
        reqs=reqs, return_logprob=logprob, return_hidden_states=False,
        spec_algorithm=NS(is_none=lambda: not spec),
        sampling_info=NS(penalizer_orchestrator=NS(is_required=penalties)),
    )


def sched(backend="fa3", free=10_000, page_size=1, decode_backend=None):
    return NS(
        server_args=NS(attention_backend=backend, decode_attention_backend=decode_backend),
        page_size=page_size,
        token_to_kv_pool_allocator=NS(available_size=lambda: free),
    )


def test_unlimited():
    assert max_safe_lookahead(sched(), batch([req(), req()]), 4) == Lookahead(4, "")


@pytest.mark.parametrize(
    ("kwargs", "decode_backend"), [({"backend": "flashinfer"}, None), ({}, "flashinfer")]
)
def test_flashinfer_forces_one_step(kwargs, decode_backend):
    """FlashInfer plans every decode step into one pinned host buffer per wrapper: a second step
    launched before the first step's copy ran would overwrite its indices."""
    got = max_safe_lookahead(sched(decode_backend=decode_backend, **kwargs), batch([req()]), 4)
    assert got == Lookahead(1, "flashinfer") and "pinned host buffer" in REASONS[got.reason]


@pytest.mark.parametrize(
    ("s", "b", "reason"),
    [
        (sched(page_size=16), batch([req()]), "page_size"),
        (sched(), batch([req()], spec=True), "speculative"),
        (sched(), batch([req()], logprob=True), "logprobs"),
        (sched(), batch([req()], penalties=True), "penalties"),
        (sched(), batch([req(grammar=object())]), "constrained"),
    ],
)
def test_per_step_features_disable_it(s, b, reason):
    assert max_safe_lookahead(s, b, 4) == Lookahead(1, reason)


def test_room_counts_live_requests_only():
    """A request that already finished (still in the merged running batch) limits nothing."""
    b = batch([req(max_new=10, out=10, finished=True), req(max_new=10, out=7)])
    assert max_safe_lookahead(sched(), b, 4) == Lookahead(3, "")


def test_kv_room_before_the_prefill_and_step0_took_theirs():
    """Asked at decide time: 2 decodes, 100 free slots of which the plan's prefill takes 93 ->
    7 left for 2 requests x k steps, step 0 included -> k = 3."""
    b = batch([req(), req()])
    got = max_safe_lookahead(sched(free=100), b, 4, pending_tokens=93, step0_allocated=False)
    assert got == Lookahead(3, "kv_pool")
    # after update_running_batch (step 0 already allocated) the same pool allows one more
    assert max_safe_lookahead(sched(free=7), b, 4, step0_allocated=True).steps == 4
    assert max_safe_lookahead(sched(free=0), b, 4, pending_tokens=50, step0_allocated=False) == (
        Lookahead(1, "kv_pool")
    )


def test_no_live_decodes():
    assert max_safe_lookahead(sched(), batch([]), 4) == Lookahead(1, "")


def test_longest_request_sets_the_room_not_the_shortest():
    """One live request has 1 token left, the other 99: the plan's 4 steps all run (the first
    finishes at its step, its surplus is discarded), so the other keeps its gap bound."""
    assert max_safe_lookahead(sched(), batch([req(max_new=5, out=4), req()]), 4) == Lookahead(4)


def test_row_of_the_req_to_token_table_caps_it():
    import torch

    b = batch([NS(**vars(req()), origin_input_ids=[0] * 90)])
    b.req_to_token_pool = NS(req_to_token=torch.zeros(1, 93, dtype=torch.int32))
    assert max_safe_lookahead(sched(), b, 8).steps == 2


# --- launch / process: per-step delivery and surplus slots (CPU fakes) ----------------------
@dataclasses.dataclass(frozen=True)
class _Processor:
    enable_overlap: bool = False


class _LaunchReq:
    def __init__(self, idx: int, finish_at: int | None):
        self.idx, self.finish_at, self.done = idx, finish_at, False
        self.kv_committed_len = 10 + idx
        self.kv = NS(kv_allocated_len=self.kv_committed_len)

    def finished(self) -> bool:
        return self.done


class _LaunchSched:
    """run_batch returns the step number; process_batch_result finishes requests at their step
    and logs every call, wait and free in one sequence."""

    def __init__(self, log: list):
        self.log, self.step = log, 0
        self.batch_result_processor = _Processor()
        self.token_to_kv_pool_allocator = NS(free=lambda t: log.append(("free", t.tolist())))

    def run_batch(self, batch):
        self.step += 1
        return self.step - 1

    def process_batch_result(self, batch, result):
        self.log.append(("process", result))
        for r in batch.reqs:
            if not r.done and r.finish_at == result:
                r.done = True


class _LaunchBatch:
    def __init__(self, reqs):
        self.reqs, self.next_slot = reqs, 100

    def prepare_for_decode(self):
        n = len(self.reqs)
        self.out_cache_loc = torch.arange(self.next_slot, self.next_slot + n)
        self.next_slot += n
        for r in self.reqs:
            r.kv_committed_len += 1
            r.kv.kv_allocated_len += 1


def _run(finish_at, k=4, marks=True):
    log: list = []
    s = _LaunchSched(log)
    b = _LaunchBatch([_LaunchReq(i, f) for i, f in enumerate(finish_at)])
    names = iter(range(100))
    la = launch(s, b, k, (lambda: f"mark{next(names)}") if marks else None)
    return process(s, la, lambda m: log.append(("wait", m))), log, b


def test_each_step_is_processed_once_its_own_mark_is_done():
    discarded, log, _ = _run([None, None], k=3)
    assert discarded == 0
    assert log == [("wait", "mark0"), ("process", 0), ("wait", "mark1"), ("process", 1),
                   ("wait", "mark2"), ("process", 2)]


def test_surplus_slots_of_a_finished_request_go_back_after_the_last_step():
    # two requests, slots of steps 1..3: step j (1..3) gives request i the slot 100 + 2 (j - 1) + i
    discarded, log, b = _run([1, None], k=4)
    assert discarded == 2  # request 0 finished at step 1 of 0..3: steps 2 and 3 dropped
    assert log[-1] == ("free", [102, 104]) and [e[0] for e in log].count("free") == 1
    assert log.index(("free", [102, 104])) > log.index(("process", 3))
    # the running request keeps every slot; the finished one is left as of its last step
    assert b.reqs[1].kv_committed_len == 11 + 3 and b.reqs[0].kv_committed_len == 10 + 1


def test_a_request_finishing_at_the_last_step_frees_nothing():
    discarded, log, _ = _run([3, 0], k=4)
    assert discarded == 3
    assert [e for e in log if e[0] == "free"] == [("free", [101, 103, 105])]


def test_without_marks_the_same_results():
    with_marks = _run([1, None], k=4)
    without = _run([1, None], k=4, marks=False)
    assert with_marks[0] == without[0]
    assert [e for e in with_marks[1] if e[0] != "wait"] == [
        e for e in without[1] if e[0] != "wait"]
    assert {e[1] for e in without[1] if e[0] == "wait"} == {None}


def test_step_zero_then_the_rest_is_the_same_launch_as_all_at_once():
    """A spatial iteration launches step 0, its prefill, then steps 1..k-1: the look-ahead
    launched in two parts has the same results, slots and marks as one `launch`."""
    def two_parts(between):
        log: list = []
        s, names = _LaunchSched(log), iter(range(100))
        b = _LaunchBatch([_LaunchReq(i, None) for i in range(2)])
        mark = lambda: f"mark{next(names)}"  # noqa: E731
        la = launch_first(s, b, mark)
        between(la)
        launch_rest(s, la, 4, mark)
        return la

    seen = []
    split = two_parts(lambda la: seen.append((list(la.results), list(la.marks), len(la.slots))))
    assert seen == [([0], ["mark0"], 0)]  # only step 0 is out when the prefill launches
    log: list = []
    names = iter(range(100))
    whole = launch(_LaunchSched(log), _LaunchBatch([_LaunchReq(i, None) for i in range(2)]), 4,
                   lambda: f"mark{next(names)}")
    assert (split.results, split.marks, split.base_committed) == (
        whole.results, whole.marks, whole.base_committed) == (
        [0, 1, 2, 3], ["mark0", "mark1", "mark2", "mark3"], [10, 11])
    assert [t.tolist() for t in split.slots] == [t.tolist() for t in whole.slots]
