"""One simulated serving instance (one GPU, or one TP group): queue, KV pages, iterations.

Request lifecycle on a replica:

1. ``queue``: routed here, no KV yet, in arrival order (a retracted request re-enters at the
   front, or at the back under SGLang's, ``Flavor.retract_to_back``), which ``order``
   (`sim.schedule`: a schedule policy, duet's admission order) may change before admission.
2. ``prefilling``: admitted, in queue order, head-of-line blocking -- up to ``token_budget``
   prompt tokens in flight and ``max_running`` requests, while the pages of its whole
   (re)prefill fit beside the running decodes' next step plus, for ``sglang``, ``ratio x
   remaining output tokens`` (SGLang's new-token ratio: 0.7, decaying to 0.1 over
   ``reserve_decay_steps`` decode steps, 0.7 again after a retraction); a prefix-cache hit
   starts it with those tokens computed.
3. ``running``: prefill done (first token sampled), one token per decode step; when the pages
   its next step(s) write do not fit, requests are preempted (retract + recompute).

A *planned* iteration asks the planner for a BatchPlan (backlog: queued after admission; KV
held: admission stopped at a page shortfall; KV use: share of pages held), timed by the
Executor. A *decode stretch* (no prompt work) plans once, checks it is a plain decode step, and
runs up to a request finishing, the pages running out or a step starting at or after
``horizon`` (the next event that could bring work), each step one iteration.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable
from typing import Literal

import numpy as np

from .executor import Executor
from .kvcache import Flavor, KvCache, kv_steps, preemption_victim
from .policies import Planner
from .prefix_cache import PrefixCache
from .request import Request

__all__ = ["ITER_KINDS", "Flavor", "Replica"]

# iteration kinds as logged in ``Replica.iter_kind`` (index into this tuple)
ITER_KINDS: tuple[str, ...] = ("aggregated", "decode_only", "spatial", "prefill_only")

Role = Literal["mixed", "prefill", "decode"]


class Replica:
    def __init__(
        self,
        idx: int,
        planner: Planner,
        executor: Executor,
        kv: KvCache,
        flavor: Flavor,
        token_budget: int,
        role: Role = "mixed",
        on_prefilled: Callable[[Request, float], None] | None = None,
        reuse_predictions: bool = True,
        max_running: int = 1 << 62,
        prefix: PrefixCache | None = None,
        order: Callable[[deque, float, Replica], list[Request]] | None = None,
    ) -> None:
        self.idx = idx
        self.planner = planner
        self.executor = executor
        self.kv = kv
        self.flavor = flavor
        self.token_budget = token_budget
        self.role = role
        self.on_prefilled = on_prefilled
        self.max_running, self.prefix = max_running, prefix  # sim/caps.py, sim/prefix_cache.py
        self.order = order  # sim/schedule.py: the admission order (None: arrival order)
        # the planner predicts with the executor's own model: its predictions may be reused
        self._reuse_ok = reuse_predictions and getattr(planner, "latency", None) is (
            executor.latency)
        self.page = kv.page_size
        self.queue: deque[Request] = deque()
        self.prefilling: list[Request] = []
        self.running: list[Request] = []
        self.joiners: list[Request] = []  # decoded elsewhere up to here (1P1D); join at start
        self.by_rid: dict[str, Request] = {}
        self.steps = array("d")  # end time of every decode step, in order
        # gap attribution (sim/attribution.py): every iteration's start time and kind, and the
        # iteration each decode step belongs to
        self.iter_start, self.iter_kind, self.step_iter = array("d"), array("b"), array("i")
        self.busy = self.kv_held = self.start_scheduled = False  # kv_held: admission short of pages
        self._pending: tuple | None = None
        self.ratio = flavor.reserve_init
        self._decay = (flavor.reserve_init - flavor.reserve_min) / flavor.reserve_decay_steps
        self._admit_seq = 0
        self.outstanding = 0  # tokens still to compute here (router load)
        self.prefill_tokens = 0  # prompt tokens launched for prefill here (hrrn's aging clock)
        self.finished: list[Request] = []
        self.mode_iters: dict[str, int] = {}
        self.spatial_iters = self.sd_sum = self.k_sum = self.preemptions = self.plans = 0
        self.busy_s = 0.0
        self.trace: list[tuple] | None = None  # [] records every iteration as it ends: finish()
        self._waiting = False  # prompts waited or prefilled when the iteration began

    # --- intake ---------------------------------------------------------------------------------
    def enqueue(self, r: Request) -> None:
        r.replica = self.idx
        self.by_rid[r.rid] = r
        r.queued_tokens = self.prefill_tokens
        self.queue.append(r)
        self.outstanding += r.base - r.computed + r.remaining_out

    def join_decoding(self, r: Request) -> None:
        """A request whose KV was transferred here (pages already allocated by the caller)."""
        r.replica = self.idx
        self.by_rid[r.rid] = r
        self.joiners.append(r)
        self.outstanding += r.remaining_out

    @property
    def has_work(self) -> bool:
        return bool(self.queue or self.prefilling or self.running or self.joiners)

    # --- KV helpers -----------------------------------------------------------------------------
    def _step_need(self, r: Request, k: int = 1) -> int:
        """Pages ``r`` must add to run k more decode steps."""
        need = -(-(r.base + r.gen + k - 1) // self.page) - r.pages
        return need if need > 0 else 0

    def _preempt(self, r: Request) -> None:
        self.kv.release(r.pages)
        r.pages = 0
        if r.run_rep >= 0:
            r.close_run(len(self.steps))
        (self.running if r in self.running else self.prefilling).remove(r)
        self.outstanding -= r.base - r.computed
        r.reset_for_recompute()
        self.outstanding += r.base
        r.queued_tokens = self.prefill_tokens
        (self.queue.append if self.flavor.retract_to_back else self.queue.appendleft)(r)
        self.preemptions += 1
        self.ratio = self.flavor.reserve_init

    def _make_room(self, k: int = 1) -> None:
        """Preempt until every running request can take k more decode steps."""
        need = sum(self._step_need(r, k) for r in self.running)
        while need > self.kv.free:
            victim = preemption_victim(self.flavor, self.running, self.prefilling)
            if victim is None:
                break
            if victim in self.running:
                need -= self._step_need(victim, k)
            self._preempt(victim)

    def _room(self) -> tuple[int, int]:
        """(prompt tokens in flight, free slots): `_admit` needs < token_budget and > 0."""
        return (sum(r.base - r.computed for r in self.prefilling),
                self.max_running - len(self.running) - len(self.prefilling))

    def may_admit(self) -> bool:  # else no one reads the queue's order
        inflight, slots = self._room()
        return inflight < self.token_budget and slots > 0

    def _admit(self) -> None:
        page = self.page
        free = self.kv.free - sum(self._step_need(r) for r in self.running)
        ratio = self.ratio
        if ratio > 0.0:
            rem = sum(r.remaining_out for r in self.running)
            rem += sum(r.remaining_out for r in self.prefilling)
            free -= -(-int(ratio * rem) // page)
        inflight, slots = self._room()
        while self.queue and inflight < self.token_budget and slots > 0:
            r = self.queue[0]
            pages = -(-r.base // page)
            need = pages + (-(-int(ratio * r.remaining_out) // page) if ratio > 0.0 else 0)
            if need > free and not (pages <= self.kv.free and not self.running
                                    and not self.prefilling):
                self.kv_held = True
                break
            self.queue.popleft()
            if self.prefix is not None and r.hashes:
                hit = self.prefix.lookup(r.hashes, r.base, (self.kv.free - pages) * page)
                r.computed = hit
                self.outstanding -= hit
            self.kv.alloc(pages)
            r.pages = pages
            free -= need
            slots -= 1
            inflight += r.base - r.computed
            self._admit_seq += 1
            r.admit_seq = self._admit_seq
            self.prefilling.append(r)

    def _reuse(self) -> bool:
        """Whether the current plan's predictions equal the executor's (no correction moved)."""
        if not self._reuse_ok:
            return False
        return all(f == 1.0 for f in self.planner.correction.factors().values())  # type: ignore

    # --- iterations -----------------------------------------------------------------------------
    def start(self, now: float, horizon: float) -> float | None:
        """Begin the next iteration at ``now``; returns its end time, or None when idle."""
        if self.joiners:
            s0 = len(self.steps)
            for r in self.joiners:
                r.run_s0 = s0
                self._admit_seq += 1
                r.admit_seq = self._admit_seq
            self.running.extend(self.joiners)
            self.joiners.clear()
        self._make_room()
        self.kv_held = False
        if self.queue:
            if self.order is not None and len(self.queue) > 1:
                self.queue = deque(self.order(self.queue, now, self))
            self._admit()
        if not self.running and not self.prefilling:
            return None
        self._waiting = bool(self.queue or self.prefilling)
        if not self.prefilling:
            end = self._start_stretch(now, horizon)
            if end is not None:
                return end
        return self._start_planned(now)

    def _start_planned(self, now: float) -> float | None:
        while True:
            plan = self.planner.plan([r.to_state() for r in self.running], [r.to_state() for r in
                                     self.prefilling], bool(self.queue), self.kv_held, self.kv.use)
            self.plans += 1
            if plan.mode == "idle":
                return None
            k = plan.lookahead if plan.decode_rids else 1
            if k > 1 and sum(self._step_need(r, k) for r in self.running) > self.kv.free:
                self._make_room(k)  # changes the decode set: plan again
                continue
            break
        by_rid = self.by_rid
        if len(plan.decode_rids) == len(self.running):
            dreqs = self.running[:]
        else:
            dreqs = [by_rid[rid] for rid in plan.decode_rids]
        chunks = [(by_rid[ch.rid], ch.length) for ch in plan.prefill]
        # counted at launch, as SGLang's Scheduler.run_batch adds extend_num_tokens (hrrn)
        self.prefill_tokens += sum(n for _, n in chunks)
        for r, _ in chunks:
            if r.sched_s < 0.0:
                r.sched_s = now
        pre = plan.prefill
        timing = self.executor.time_plan(
            plan, [r.base + r.gen - 1 for r in dreqs], [ch.length for ch in pre],
            [ch.start for ch in pre],
            [ch.start + ch.length >= r.base for (r, _), ch in zip(chunks, pre, strict=True)],
            self._reuse())
        steps = len(timing.step_offsets)
        if steps > 1 and sum(self._step_need(r, steps) for r in dreqs) > self.kv.free:
            # a free-running decode (pdmux) out of KV pages stops at the last step that fits
            ctx = np.fromiter((r.base + r.gen - 1 for r in dreqs), np.int64, len(dreqs))
            steps = self._kv_steps(ctx, steps, dreqs)
            del timing.step_offsets[steps:]
        for r in dreqs:
            n = self._step_need(r, steps)
            if n:
                self.kv.alloc(n)
                r.pages += n
        self.planner.observe(plan, timing.duration_s, timing.decode_s if steps else None,
                             timing.prefill_s if chunks else None)
        mode = plan.mode
        if mode == "aggregated" and not dreqs:
            mode = "prefill_only"
        elif not chunks:
            mode = "decode_only"
        self.mode_iters[mode] = self.mode_iters.get(mode, 0) + 1
        self._log_iteration(now, mode)
        if mode == "spatial":
            self.spatial_iters += 1
            self.sd_sum += plan.sms_decode
            self.k_sum += steps
        self._pending = ([now + off for off in timing.step_offsets], dreqs, chunks)
        self.busy_s += timing.duration_s
        return now + timing.duration_s

    def _start_stretch(self, now: float, horizon: float) -> float | None:
        running = self.running
        plan = self.planner.plan([r.to_state() for r in running], [], False, self.kv_held,
                                 self.kv.use)
        self.plans += 1
        if plan.mode == "idle" or plan.prefill or plan.lookahead != 1:
            return None
        if len(plan.decode_rids) != len(running):
            return None
        n = len(running)
        ctx = np.fromiter((r.base + r.gen - 1 for r in running), np.int64, n)
        m_cap = min(r.remaining_out for r in running)
        m_cap = self._kv_steps(ctx, m_cap)
        first = plan.predicted_decode_s if plan.mode == "decode_only" and self._reuse() else None
        d = self.executor.decode_steps(ctx, m_cap, first)
        ends = now + np.cumsum(d)
        m = int(np.searchsorted(ends - d, horizon, side="left"))
        m = min(max(m, 1), m_cap)
        for r in running:
            need = self._step_need(r, m)
            if need:
                self.kv.alloc(need)
                r.pages += need
        self.planner.observe(plan, float(d[0]), float(d[0]), None)
        self.mode_iters["decode_only"] = self.mode_iters.get("decode_only", 0) + m
        self._log_iteration(now, "decode_only")
        ends = ends[:m]
        self._pending = (ends, running[:], [])
        end = float(ends[-1])
        self.busy_s += end - now
        return end

    def _log_iteration(self, now: float, mode: str) -> None:
        self.iter_start.append(now)
        self.iter_kind.append(ITER_KINDS.index(mode))

    def _kv_steps(self, ctx: np.ndarray, m_cap: int, reqs: list[Request] | None = None) -> int:
        """Most decode steps (<= m_cap, >= 1) of ``reqs`` (default: the running requests, in
        the order of ``ctx``) whose page growth fits the free pages (`kvcache.kv_steps`)."""
        reqs = self.running if reqs is None else reqs
        pages = np.fromiter((r.pages for r in reqs), np.int64, len(reqs))
        return kv_steps(ctx, pages, self.kv.free, self.page, m_cap)

    def finish(self, now: float) -> None:
        """Apply the iteration that ends at ``now``."""
        step_times, dreqs, chunks = self._pending
        self._pending = None
        if self.trace is not None:  # (start, end, kind, decodes, [(tokens, cached)], waiting, held)
            self.trace.append((self.iter_start[-1], now, self.iter_kind[-1], len(dreqs),
                               [(n, r.computed) for r, n in chunks], self._waiting, self.kv_held))
        s_base = len(self.steps)
        self.steps.extend(step_times)
        k = len(step_times)
        done, produced = False, 0
        if k:
            self.step_iter.extend(array("i", [len(self.iter_start) - 1]) * k)
            for r in dreqs:
                rem = r.output_len - r.gen0 - r.gen
                if rem <= k:
                    r.gen += rem
                    produced += rem
                    r.close_run(s_base + rem)
                    r.finish_s = self.steps[s_base + rem - 1]
                    self._complete(r)
                    done = True
                else:
                    r.gen += k
                    produced += k
            if len(dreqs) != len(self.running):
                self._reopen_excluded(dreqs, s_base, k)
            if self.ratio > self.flavor.reserve_min:
                self.ratio = max(self.flavor.reserve_min, self.ratio - self._decay * k)
        for r, length in chunks:
            r.computed += length
            produced += length
            if r.computed >= r.base:
                self._prefilled(r, now)
                done = True
        self.outstanding -= produced
        if done:
            self.running = [r for r in self.running if r.finish_s < 0.0]
            self.prefilling = [r for r in self.prefilling if r.computed < r.base]

    def _reopen_excluded(self, dreqs: list[Request], s_base: int, k: int) -> None:
        inplan = {id(r) for r in dreqs}
        for r in self.running:
            if id(r) not in inplan and r.finish_s < 0.0 and r.run_rep >= 0:
                r.close_run(s_base)
                r.open_run(self.idx, -1.0, s_base + k)

    def _prefilled(self, r: Request, now: float) -> None:
        if self.prefix is not None and r.hashes:
            self.prefix.insert(r.hashes)
        r.gen = 1  # the completing chunk samples a token
        self.outstanding -= 1
        if self.role == "prefill":
            if self.on_prefilled is None:
                raise RuntimeError("prefill replica without a hand-off")
            self.outstanding -= r.remaining_out
            del self.by_rid[r.rid]
            r.replica = -1
            self.on_prefilled(r, now)
            return
        if r.first_token_s < 0.0:
            r.first_token_s = now
        r.open_run(self.idx, now, len(self.steps))
        if r.remaining_out <= 0:
            r.close_run(len(self.steps))
            r.finish_s = now
            self._complete(r)
        else:
            self.running.append(r)

    def _complete(self, r: Request) -> None:
        self.kv.release(r.pages)
        r.pages = 0
        del self.by_rid[r.rid]
        self.finished.append(r)

    def release_transferred(self, pages: int) -> None:
        """The KV of a handed-off request (``pages``) has left this (prefill) replica."""
        self.kv.release(pages)
