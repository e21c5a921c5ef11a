"""Admission order: which waiting prompts a replica prefills first (``--duet-admission``).

Every driver asks the same `Admission.order` before it forms a prefill: `DuetScheduler` (over
SGLang's waiting queue, after SGLang's own ``calc_priority``), the simulator's replica, and
the router's queue-time prediction. The capacity rule counts a request as served when its
first token comes within the TTFT SLO, so on heavy-tailed prompts (mooncake) a burst of long
prompts queued first come, first served makes every short prompt behind it miss; the order is
what moves that.

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

__all__ = ["ADMISSION_ORDERS", "Admission", "AdmissionConfig", "Candidate", "fit_prefill_seconds"]

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
    docstring; `fit_prefill_seconds`)."""

    def __init__(self, cfg: AdmissionConfig, seconds: PrefillSeconds) -> None:
        self.cfg = cfg
        self.seconds = seconds
        self.aged_s = cfg.aging * cfg.ttft_slo_s

    def deadline(self, c: Candidate) -> float:
        return c.arrival_s + self.cfg.ttft_slo_s + self.cfg.per_token_s * c.prompt_len

    def service(self, c: Candidate) -> float:
        q = max(1, c.prompt_len - c.cached)
        return self.seconds(q, c.prompt_len - q)

    def order(self, waiting: Sequence[Candidate], now: float,
              service_s: Sequence[float] | None = None) -> list[int]:
        """Indices of ``waiting`` in the order to admit (``now``: seconds, same clock as the
        arrivals; ``service_s``: each request's prefill seconds where the caller knows them,
        else predicted)."""
        n = len(waiting)
        if n < 2:
            return list(range(n))
        svc = list(service_s) if service_s is not None else [self.service(c) for c in waiting]
        cut = now - self.aged_s
        aged = sorted((i for i in range(n) if waiting[i].arrival_s <= cut),
                      key=lambda i: waiting[i].arrival_s)
        rest = [i for i in range(n) if waiting[i].arrival_s > cut] if aged else list(range(n))
        kind = self.cfg.order
        if kind == "fcfs":
            rest.sort(key=lambda i: waiting[i].arrival_s)
        elif kind == "sjf":
            rest.sort(key=lambda i: (svc[i], waiting[i].arrival_s))
        else:
            rest = self._on_time_first(waiting, svc, rest, now)
        return aged + rest if aged else rest

    def _on_time_first(self, waiting: Sequence[Candidate], svc: list[float], idx: list[int],
                       now: float) -> list[int]:
        """Moore and Hodgson's rule over ``idx`` (the module docstring)."""
        due = {i: self.deadline(waiting[i]) for i in idx}
        idx.sort(key=lambda i: (due[i], waiting[i].arrival_s))
        t, taken, late = now, [], set()
        for i in idx:
            s = svc[i]
            t += s
            heapq.heappush(taken, (-s, i))
            if t > due[i]:
                s_long, j = heapq.heappop(taken)
                t += s_long
                late.add(j)
        if not late:
            return idx
        return [i for i in idx if i not in late] + [i for i in idx if i in late]
