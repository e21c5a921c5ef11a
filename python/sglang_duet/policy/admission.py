"""Admission order: which waiting prompts a replica prefills first (``--duet-admission``).

Every driver asks the same `Admission.order` before it forms a prefill: `DuetScheduler` (over
SGLang's waiting queue, after SGLang's own ``calc_priority``), the simulator's replica, and
the router's queue-time prediction. The answer depends on the queue's requests and ``now``,
never on the queue's order (ties are broken by the requests), so a driver may skip asking while
it admits no one (the simulator's replica does) and change no later answer. The capacity
rule counts a request as served when its first token comes within the TTFT SLO, so on
heavy-tailed prompts (mooncake) a burst of long prompts queued first come, first served makes
every short prompt behind it miss; the order is what moves that.

Orders (`ADMISSION_ORDERS`):

* ``fcfs``: arrival order, SGLang's default ``--schedule-policy fcfs``.
* ``deadline``: each request is due at ``arrival + ttft_slo (+ per_token x prompt tokens)``.
  Requests are taken in deadline order, each charged its predicted prefill seconds from
  ``now``; whenever one would finish past its deadline, the longest request taken so far is set
  aside (Moore and Hodgson's rule, 1968: on one machine it maximises how many finish on time).
  Those that can still make it go first, in deadline order; those set aside follow, in
  deadline order: a request that can no longer make it yields, and is never dropped.
* ``sjf``: shortest predicted prefill first (ties by arrival), for comparison: more on time in
  bursts, at the cost of the longest prompts.

Every order puts first, in arrival order, the requests waiting longer than ``aging x
ttft_slo`` (`AdmissionConfig.aging`): no request waits past that bound for a shorter one, so
the longest prompts are never starved.

The prediction is the latency model's whole-device prefill of the request's uncached tokens
over its cached ones, fitted once per model as ``a q + b q (c + q / 2) + d`` (seconds; q new
tokens, c cached: the per-token work and its attention), so that ordering a queue costs
arithmetic, not one model call per request. Times in seconds.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..latency import Batch

__all__ = ["ADMISSION_ORDERS", "Admission", "AdmissionConfig", "Candidate", "fit_prefill_seconds",
           "model_prefill_seconds"]

ADMISSION_ORDERS = ("fcfs", "deadline", "sjf")


@dataclass(frozen=True)
class AdmissionConfig:
    """``order``: one of `ADMISSION_ORDERS`; ``ttft_slo_s``: the deadline after arrival;
    ``per_token_s``: seconds of deadline added per prompt token (0: one deadline for all);
    ``aging``: past ``aging x ttft_slo_s`` of waiting a request goes first (> 0)."""

    order: str = "deadline"
    ttft_slo_s: float = 10.0
    per_token_s: float = 0.0
    aging: float = 3.0

    def __post_init__(self) -> None:
        if self.order not in ADMISSION_ORDERS:
            raise ValueError(f"unknown admission order {self.order!r}; choices: "
                             f"{', '.join(ADMISSION_ORDERS)}")
        if not self.ttft_slo_s > 0 or not self.aging > 0 or self.per_token_s < 0:
            raise ValueError("admission: ttft_slo_s and aging must be > 0, per_token_s >= 0")


class Candidate(NamedTuple):
    """One waiting request: when it arrived (s), its prompt tokens, those already cached."""

    arrival_s: float
    prompt_len: int
    cached: int = 0


PrefillSeconds = Callable[[int, int], float]  # (new tokens, cached tokens) -> seconds


def fit_prefill_seconds(predict: PrefillSeconds) -> PrefillSeconds:
    """A closed form of ``predict`` (one request's prefill seconds), fitted by least squares on
    a grid of prompts from 256 to 128K tokens with and without cached context."""
    rows, ys = [], []
    for q in (256, 1024, 4096, 16384, 65536, 131072):
        for c in (0, q // 2, 4 * q):
            rows.append((q, q * (c + q / 2.0), 1.0))
            ys.append(predict(q, c))
    a, b, d = _lstsq(rows, ys)

    def seconds(q: int, c: int) -> float:
        return a * q + b * q * (c + q / 2.0) + d

    return seconds


def model_prefill_seconds(latency: object) -> PrefillSeconds:
    """`fit_prefill_seconds` of one request's whole-device prefill as ``latency`` (a
    `sglang_duet.latency.LatencyModel`) predicts it: what the runtime's scheduler and router
    order by, fitted once at start-up."""
    return fit_prefill_seconds(
        lambda q, c: latency.predict(Batch([q], [c])).total_s)  # type: ignore[attr-defined]


def _lstsq(rows: list[tuple[float, float, float]], ys: list[float]) -> tuple[float, ...]:
    """Least squares by the normal equations, scaled (three unknowns: no numpy needed here)."""
    scale = [max(abs(r[i]) for r in rows) or 1.0 for i in range(3)]
    x = [[r[i] / scale[i] for i in range(3)] for r in rows]
    m = [[sum(xr[i] * xr[j] for xr in x) for j in range(3)] for i in range(3)]
    v = [sum(xr[i] * y for xr, y in zip(x, ys, strict=True)) for i in range(3)]
    for i in range(3):  # Gauss-Jordan with partial pivoting
        p = max(range(i, 3), key=lambda k: abs(m[k][i]))
        m[i], m[p], v[i], v[p] = m[p], m[i], v[p], v[i]
        for k in range(3):
            if k != i and m[i][i]:
                f = m[k][i] / m[i][i]
                m[k] = [mk - f * mi for mk, mi in zip(m[k], m[i], strict=True)]
                v[k] -= f * v[i]
    return tuple(v[i] / m[i][i] / scale[i] if m[i][i] else 0.0 for i in range(3))


class Admission:
    """`order` for one replica: ``seconds(q, c)``: predicted prefill seconds (see the module
    docstring; `fit_prefill_seconds`).

    `reference_order` states the rule readably; `order` returns the same list faster, as every
    driver calls it once per iteration over the whole queue (a runtime with 256 waiting
    requests): each candidate's seconds are kept by the candidate, and the last answer
    is reused while the queue is equal (or is that answer applied to it, as every driver does)
    and ``now`` has not reached the first moment that would
    change it (a request crossing the aging bound, or a Moore-Hodgson comparison flipping:
    `_Memo`). Candidates may be plain ``(arrival_s, prompt_len, cached)`` tuples."""

    _SECONDS_KEPT = 1 << 16  # entries of the per-shape seconds cache before it is cleared

    def __init__(self, cfg: AdmissionConfig, seconds: PrefillSeconds) -> None:
        self.cfg = cfg
        self.seconds = seconds
        self.aged_s = cfg.aging * cfg.ttft_slo_s
        self._secs: dict[tuple[float, int, int], tuple[float, float]] = {}
        self._memo: _Memo | None = None

    def deadline(self, c: Candidate) -> float:
        return c[0] + self.cfg.ttft_slo_s + self.cfg.per_token_s * c[1]

    def service(self, c: Candidate) -> float:
        q = max(1, c[1] - c[2])
        return self.seconds(q, c[1] - q)

    def order(self, waiting: Sequence[Candidate], now: float,
              service_s: Sequence[float] | None = None) -> list[int]:
        """Indices of ``waiting`` in the order to admit (``now``: seconds, same clock as the
        arrivals; ``service_s``: each request's prefill seconds (>= 0) where the caller knows
        them, else predicted); equal to `reference_order`."""
        n = len(waiting)
        if n < 2:
            return list(range(n))
        svc = None if service_s is None else list(service_s)
        memo = self._memo
        if memo is not None and memo.since <= now < memo.until:
            if memo.waiting == waiting and memo.service == svc:
                return list(memo.result)
            if memo.applied_to(waiting, svc):  # already in order
                return list(range(n))
        result, until = self._compute(waiting, now, svc)
        self._memo = _Memo(list(waiting), svc, now, until, result)
        return list(result)

    def _costs_of(self, waiting: Sequence[Candidate], svc: list[float] | None = None
                  ) -> tuple[Sequence[float], ...]:
        """(service seconds, deadlines) of the candidates (`service`, `deadline`), each pair
        kept by the candidate itself (a tuple: its arrival, prompt and cached tokens), so that
        a request seen in an earlier queue costs one lookup; ``svc``: the caller's seconds,
        which replace the predicted ones."""
        kept = self._secs
        if len(kept) > self._SECONDS_KEPT:
            kept.clear()
        get, miss = kept.get, self._cost
        serv, due = zip(*[get(c) or miss(c) for c in waiting], strict=True)
        return (serv if svc is None else svc), due

    def _cost(self, c: Candidate) -> tuple[float, float]:
        pair = self._secs[c] = (self.service(c), self.deadline(c))
        return pair

    def _compute(self, waiting: Sequence[Candidate], now: float, svc: list[float] | None
                 ) -> tuple[list[int], float]:
        """`reference_order` and the first ``now`` at which it may differ (seconds; less a
        margin for the rounding of sums that start at ``now``); ``svc``: as `order`'s
        ``service_s``."""
        n = len(waiting)
        cut, aged_s = now - self.aged_s, self.aged_s
        arr = [c[0] for c in waiting]
        first = min(arr)
        if first > cut:  # nobody past the aging bound (the usual case): no pass over the queue
            aged, rest, until = [], list(range(n)), first + aged_s
        else:
            aged = self._by_arrival([i for i in range(n) if arr[i] <= cut], waiting, arr, svc)
            rest = [i for i in range(n) if arr[i] > cut]
            until = min((arr[i] for i in rest), default=float("inf")) + aged_s
        kind = self.cfg.order
        if kind == "fcfs":
            rest = self._by_arrival(rest, waiting, arr, svc)
        elif kind == "sjf":
            serv, due = self._costs_of(waiting, svc)
            rest = [i for *_, i in sorted([(serv[i], arr[i], due[i], *waiting[i][1:3], i)
                                           for i in rest])]
        elif rest:
            rest, flip = self._on_time_first_fast(waiting, rest, arr, now, svc)
            until = min(until, flip)
        return (aged + rest if aged else rest), until - _MARGIN_S

    def _by_arrival(self, idx: list[int], waiting: Sequence[Candidate], arr: list[float],
                    svc: list[float] | None) -> list[int]:
        """``idx`` by arrival, equal arrivals by deadline, then predicted seconds (the
        reference's key; the costs are looked up only where arrivals tie)."""
        idx = sorted(idx, key=arr.__getitem__)
        if len({arr[i] for i in idx}) < len(idx):
            serv, due = self._costs_of(waiting, svc)
            idx.sort(key=lambda i: (arr[i], due[i], serv[i], *waiting[i][1:3]))
        return idx

    def _on_time_first_fast(self, waiting: Sequence[Candidate], idx: list[int],
                            arr: list[float], now: float, svc: list[float] | None
                            ) -> tuple[list[int], float]:
        """`_on_time_first`, plus the least ``now`` at which one of its comparisons ``t > due``
        would come out otherwise (t is ``now`` plus the work taken so far). The same steps, in
        cheaper form: indices sorted by one float key (tuples only where deadlines tie), the
        heap built at the first late request, a push and pop as one `heapq.heappushpop`."""
        serv, due = self._costs_of(waiting, svc)
        order = sorted(idx, key=due.__getitem__)  # stable: equal keys keep ascending indices
        # ties: by arrival, then the shorter first, then by index (the reference's stable sort)
        if len({due[i] for i in idx}) < len(idx):
            order.sort(key=lambda i: (due[i], arr[i], serv[i], *waiting[i][1:3]))
        t, kept, late = now, [], []
        heap = False
        slack = float("inf")
        pushpop, push = heapq.heappushpop, heapq.heappush
        for rank, i in enumerate(order):
            s = serv[i]
            d = due[i]
            if now + s > d:  # hopeless: no heap, no sum. One turns hopeless only once it
                late.append(i)  # would be set aside anyway or a comparison below flipped
                continue
            t += s
            if t > d:
                if not heap:
                    heapq.heapify(kept)
                    heap = True
                neg, _, _, j = pushpop(kept, (-s, -d, -rank, i))
                t += neg
                late.append(j)
            else:  # on time until now + (t - now) passes d
                if d - t < slack:
                    slack = d - t
                if heap:
                    push(kept, (-s, -d, -rank, i))
                else:
                    kept.append((-s, -d, -rank, i))
        if not late:
            return order, now + slack
        gone = set(late)
        return [i for i in order if i not in gone] + late_sorted(order, gone), now + slack

    def reference_order(self, waiting: Sequence[Candidate], now: float,
                        service_s: Sequence[float] | None = None) -> list[int]:
        """The rule, readably (`order` is the same, faster): requests past the aging bound
        first in arrival order, then the rest in the configured order. Ties are broken by the
        requests, never by their places in the queue (arrival, deadline, seconds, prompt and
        cached tokens, in each order's precedence), so that the answer depends on the queue's
        requests and ``now`` only: a caller may skip asking when it admits no one. Seconds
        are >= 0."""
        waiting = [Candidate(*c) for c in waiting]
        n = len(waiting)
        if n < 2:
            return list(range(n))
        svc = list(service_s) if service_s is not None else [self.service(c) for c in waiting]

        def arrival_first(i: int) -> tuple[float, ...]:
            c = waiting[i]
            return c.arrival_s, self.deadline(c), svc[i], c.prompt_len, c.cached

        cut = now - self.aged_s
        aged = sorted((i for i in range(n) if waiting[i].arrival_s <= cut), key=arrival_first)
        rest = [i for i in range(n) if waiting[i].arrival_s > cut] if aged else list(range(n))
        kind = self.cfg.order
        if kind == "fcfs":
            rest.sort(key=arrival_first)
        elif kind == "sjf":
            rest.sort(key=lambda i: (svc[i], *arrival_first(i)))
        else:
            rest = self._on_time_first(waiting, svc, rest, now)
        return aged + rest if aged else rest

    def _on_time_first(self, waiting: Sequence[Candidate], svc: list[float], idx: list[int],
                       now: float) -> list[int]:
        """Moore and Hodgson's rule over ``idx`` (the module docstring). Ties are broken by the
        requests, not by their places in the queue (equal deadlines: the earlier arrival, then
        the shorter, first; of equally long requests the one due last, then the one taken last,
        is set aside), so that the queue put in this order is already in order. A request that
        would be late even if taken first (hopeless) is set aside as it comes: the rule would
        set that one aside (the longest taken is then itself) at the cost of a heap push."""
        due = {i: self.deadline(waiting[i]) for i in idx}
        idx.sort(key=lambda i: (due[i], waiting[i].arrival_s, svc[i], waiting[i].prompt_len,
                                waiting[i].cached))
        t, taken, late = now, [], set()
        for rank, i in enumerate(idx):
            s = svc[i]
            if now + s > due[i]:
                late.add(i)
                continue
            t += s
            heapq.heappush(taken, (-s, -due[i], -rank, i))
            if t > due[i]:
                s_long, _, _, j = heapq.heappop(taken)
                t += s_long
                late.add(j)
        if not late:
            return idx
        return [i for i in idx if i not in late] + [i for i in idx if i in late]


# How much earlier than the exact moment a memoised order is recomputed (seconds): the sums
# that decide it start at ``now``, and their rounding differs by far less than this.
_MARGIN_S = 1e-6


def late_sorted(order: list[int], gone: set[int]) -> list[int]:
    """The set-aside requests in ``order``'s (deadline) order."""
    return [i for i in order if i in gone]


class _Memo(NamedTuple):
    """The last answer of `Admission.order`: for ``waiting`` (and the given ``service``
    seconds) it holds while since <= now < until (seconds)."""

    waiting: list[Candidate]
    service: list[float] | None
    since: float
    until: float
    result: list[int]

    def applied_to(self, queue: Sequence[Candidate], service: list[float] | None) -> bool:
        """Whether ``queue`` (and ``service``) is ``waiting`` put in the order ``result``, as
        every driver puts its queue after asking: the answer for it is then the identity."""
        if len(queue) != len(self.waiting) or (service is None) != (self.service is None):
            return False
        w, s = self.waiting, self.service
        return all(queue[j] == w[i] and (s is None or service[j] == s[i])  # type: ignore[index]
                   for j, i in enumerate(self.result))
