"""The queue-aware bound: the physical bound's ideal scheduler under the capacity rule's TTFT SLO.

The physical bound (`bound.py`) counts throughput only: the highest rate at which an ideal
scheduler's prefill and decode work fit the GPUs. The capacity rule also asks that 90% of the
window's requests get their first token within the TTFT SLO, and under Poisson arrivals prompts
queue even below that rate: on mooncake, where prompts run from a few hundred tokens to over
100K, a burst of long ones holds every prompt behind it for seconds. Every system compared here
admits prompts first come, first served (SGLang's default ``--schedule-policy fcfs``, vLLM's
FCFS, Dynamo's prefill queue), so this bound runs the capacity runs' own requests (the sweep's
sample, seed and run length, `sim.build_arrivals`) through an ideal FCFS server:

* one queue for all replicas (a request starts on whichever replica frees first: what a
  router achieves that knows every prompt's cost and sends each request to the replica with
  the least queued work), no front end, no host time, no chunking, no KV pool limit;
* each request's prefill takes its new (uncached) tokens at the bound's per-token time plus its
  own attention over its context (`bound._Ideal`; scaled so that the sample's attention sums to
  the batch's), with the bound's prefix cache: one LRU as large as every replica's KV pool
  together, each prompt's blocks cached from its arrival on (so a prompt still queued already
  gives hits), which errs high;
* the replica prefills at ``speed`` times its prefill-only rate. ``queue_ceiling_qps``: speed 1,
  decode free (it errs high for every system here). ``queue_qps``: the speed the decode
  demand of the offered load leaves, at best (`prefill_rate`: the most prefill the bound's
  configurations sustain beside decoding ``qps / replicas`` requests per second), as a fluid:
  decode demand at its mean, so an estimate rather than a strict bound (a burst of prompts
  leaves fewer requests decoding, and more of the device to prefill, than the mean);
* a rate passes by the steady-state rule the capacity runs use (`sim.steady`: the window of
  arrivals 10%-90%, admitted >= 0.97 of offered, TTFT rising <= 10% of its SLO, and >= the
  target share of the window's first tokens within the TTFT SLO; TBT is met by construction).

The best order (issue #48 item 5): the same ideal server admitting in a predictive order
(`sglang_duet.policy.admission`) under the same aging bound (``aging x`` the TTFT SLO), each
request's exact prefill seconds known; ``queue_best_qps`` is the highest of FCFS and those
orders at the fluid speed, ``queue_best_order`` which. It runs ``sjf`` (`sjf_first_tokens`, a
heap): ``deadline`` (Moore and Hodgson's rule, `ordered_first_tokens`, the readable reference
for any order) was below it on every case measured (mooncake Qwen3-8B 2.83 against 2.90
req/s, azure-conv 50.8 against 54.0, azure-code 38.4 against 41.2, at 4,000-6,000 requests)
and costs a pass over the whole queue per admission.

`checked_queue_bound` applies the capacity runs' run-length rule to it: the figure at twice the
requests where it falls by more than 5% there (mooncake's long prompts are rare enough that a
longer sample holds more of them).

The bisection stops within 0.1%; a capacity is the passing end of a 2.5% bracket
(`sweep.FINE_TOL`), so a share of this figure can read up to 2.5% low. ``queue_qps`` can
exceed the throughput bound by the rule's own tolerance (a queue growing by
3% of the offered load passes); the summary reads each policy against the lower of the two.
Seconds, tokens, requests per second.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sglang_duet.latency import Batch
from sglang_duet.policy.admission import Admission, AdmissionConfig, Candidate
from sglang_duet.sim import SimConfig, build_arrivals, load_trace
from sglang_duet.sim.steady import keeps_up, slope, window_bounds

from .bound import _configurations, _Ideal, prefix_hits
from .search import run_length

__all__ = ["BEST_ORDERS", "FcfsQueue", "checked_queue_bound", "fcfs_first_tokens",
           "ordered_first_tokens", "prefill_rate", "queue_bound", "sjf_first_tokens",
           "window_passes"]

BEST_ORDERS = ("sjf",)  # the predictive orders the best-order bound tries (module docstring)

_REL_TOL = 1e-3  # the bisection's bracket, relative


def prefill_rate(points: Sequence[tuple[float, float]], d: float) -> float:
    """The most prefill ``a`` (requests/s) a convex combination of ``points`` (a_i, d_i)
    sustains while decoding at least ``d`` requests/s (0 when none reaches ``d``): a linear
    program with two constraints, so its optimum mixes at most two points."""
    ab = np.asarray(points, dtype=float)
    a, dd = ab[:, 0], ab[:, 1]
    best = float(a[dd >= d].max(initial=0.0))
    hi, lo = np.flatnonzero(dd > d), np.flatnonzero(dd < d)
    if hi.size and lo.size:
        f = (d - dd[lo][None, :]) / (dd[hi][:, None] - dd[lo][None, :])  # share of the high
        best = max(best, float((f * a[hi][:, None] + (1 - f) * a[lo][None, :]).max()))
    return best


def fcfs_first_tokens(arrival: np.ndarray, service: np.ndarray, servers: int) -> np.ndarray:
    """First-token times of requests served first come, first served from one queue by
    ``servers`` identical servers (seconds; ``arrival`` sorted)."""
    free = [0.0] * servers
    out = np.empty(len(arrival))
    for i, (t, s) in enumerate(zip(arrival.tolist(), service.tolist(), strict=True)):
        start = max(heapq.heappop(free), t)
        out[i] = start + s
        heapq.heappush(free, start + s)
    return out


def ordered_first_tokens(arrival: np.ndarray, service: np.ndarray, servers: int,
                         adm: Admission) -> np.ndarray:
    """First-token times when ``servers`` identical servers take, whenever one frees, the first
    of the waiting requests in ``adm``'s order (seconds; ``arrival`` sorted)."""
    free = [0.0] * servers
    out = np.empty(len(arrival))
    arr, svc = arrival.tolist(), service.tolist()
    waiting: list[int] = []
    i, n = 0, len(arr)
    while i < n or waiting:
        t = heapq.heappop(free)
        if not waiting and arr[i] > t:
            t = arr[i]
        while i < n and arr[i] <= t:
            waiting.append(i)
            i += 1
        k = adm.order([Candidate(arr[j], 1) for j in waiting], t,
                      [svc[j] / servers for j in waiting])[0] if len(waiting) > 1 else 0
        j = waiting.pop(k)
        out[j] = t + svc[j]
        heapq.heappush(free, t + svc[j])
    return out


def sjf_first_tokens(arrival: np.ndarray, service: np.ndarray, servers: int, aged_s: float
                     ) -> np.ndarray:
    """`ordered_first_tokens` under ``sjf`` with requests waiting ``aged_s`` or longer first, in
    arrival order, by two heaps instead of a sort per admission (tested equal)."""
    free = [0.0] * servers
    out = np.empty(len(arrival))
    arr, svc = arrival.tolist(), service.tolist()
    by_len: list[tuple[float, float, int]] = []  # (service, arrival, index)
    done = [False] * len(arr)
    oldest = 0  # the first index that may still wait (arrival order)
    i, n, waiting = 0, len(arr), 0
    while i < n or waiting:
        t = heapq.heappop(free)
        if not waiting and arr[i] > t:
            t = arr[i]
        while i < n and arr[i] <= t:
            heapq.heappush(by_len, (svc[i], arr[i], i))
            waiting += 1
            i += 1
        while done[oldest]:
            oldest += 1
        if arr[oldest] <= t - aged_s:
            j = oldest
        else:
            while done[by_len[0][2]]:
                heapq.heappop(by_len)
            j = heapq.heappop(by_len)[2]
        done[j] = True
        waiting -= 1
        out[j] = t + svc[j]
        heapq.heappush(free, t + svc[j])
    return out


def window_passes(arrival: np.ndarray, first: np.ndarray, ttft_slo_s: float, target: float
                  ) -> bool:
    """`sim.steady`'s pass rule on first tokens alone (its window, slope and keep-up rule)."""
    lo, hi = window_bounds(len(arrival))
    t0, t1 = arrival[lo], arrival[hi - 1]
    x, y = arrival[lo:hi], first[lo:hi] - arrival[lo:hi]
    admitted = np.count_nonzero((first >= t0) & (first <= t1)) / (hi - lo)
    met = np.count_nonzero(y <= ttft_slo_s + 1e-12) / (hi - lo)
    return keeps_up(admitted, slope(x, y) * (t1 - t0), ttft_slo_s) and bool(met >= target)


class FcfsQueue:
    """The ideal FCFS server over the capacity runs' first ``requests`` requests (the module
    docstring): ``passes(qps, speed)`` and ``highest(speed_at)``, the highest passing rate when
    the replicas prefill at ``speed_at(qps)`` times the bound's prefill-only speed."""

    def __init__(self, cfg: SimConfig, requests: int, target: float = 0.9,
                 ideal: _Ideal | None = None, order: str = "fcfs") -> None:
        ideal = self.ideal = ideal or _Ideal(cfg)
        self.replicas, self.target = cfg.gpus // cfg.tp, target
        # arrivals scale as 1 / qps
        self.unit = unit = build_arrivals(load_trace(cfg.trace), 1.0, requests, cfg.seed)
        p = unit.input_len.astype(np.int64)
        hit = prefix_hits(p, unit.hash_ids, ideal.cache_tokens)
        new = p - hit
        att = np.array([ideal.lat.predict(Batch([int(q)], [int(c)])).attention_s
                        for q, c in zip(new.tolist(), hit.tolist(), strict=True)])
        att *= ideal.lat.predict(Batch(new, hit)).attention_s / att.sum()
        self.service = new * ideal.per_token_s() + att
        self.ttft = cfg.ttft_slo_ms / 1e3
        self.top = 2.0 * self.replicas / float(self.service.mean())  # twice prefill-only's rate
        self.adm = None if order == "fcfs" else Admission(
            AdmissionConfig(order, self.ttft, aging=cfg.duet_aging), lambda q, c: 0.0)

    def passes(self, qps: float, speed: float) -> bool:
        if speed <= 0.0:
            return False
        arrival = self.unit.arrival_s / qps
        if self.adm is None:
            first = fcfs_first_tokens(arrival, self.service / speed, self.replicas)
        elif self.adm.cfg.order == "sjf":
            first = sjf_first_tokens(arrival, self.service / speed, self.replicas,
                                     self.adm.aged_s)
        else:
            first = ordered_first_tokens(arrival, self.service / speed, self.replicas, self.adm)
        return window_passes(arrival, first, self.ttft, self.target)

    def highest(self, speed_at: Callable[[float], float]) -> float:
        """The highest passing rate (within `_REL_TOL`), or 0.0 when even top / 1024 fails."""
        lo, hi = 0.0, self.top
        while self.passes(hi, speed_at(hi)):
            lo, hi = hi, 2.0 * hi
        lo = lo or hi / 1024.0
        if not self.passes(lo, speed_at(lo)):
            return 0.0
        while hi / lo > 1.0 + _REL_TOL:
            mid = (lo * hi) ** 0.5
            lo, hi = (mid, hi) if self.passes(mid, speed_at(mid)) else (lo, mid)
        return lo


def queue_bound(cfg: SimConfig, requests: int, target: float = 0.9,
                ideal: _Ideal | None = None, orders: Sequence[str] = ()) -> dict[str, Any]:
    """``queue_qps`` and ``queue_ceiling_qps`` for ``cfg``'s cluster over the capacity runs'
    first ``requests`` requests (the module docstring); ``ideal``: `_Ideal(cfg)`, if built;
    ``orders``: the predictive orders whose best gives ``queue_best_qps`` (none: FCFS's)."""
    fcfs = FcfsQueue(cfg, requests, target, ideal)
    _, points, pre_s, _, _ = _configurations(fcfs.ideal)

    def fluid(qps: float) -> float:
        return min(1.0, prefill_rate(points, qps / fcfs.replicas) * pre_s)

    q = fcfs.highest(fluid)
    if q <= 0.0:
        raise ValueError(f"{cfg.trace}: even the ideal scheduler misses the TTFT SLO at "
                         f"{fcfs.top / 1024.0:.3g} req/s")
    best = {o: FcfsQueue(cfg, requests, target, fcfs.ideal, o).highest(fluid) for o in orders}
    order = max(best, key=best.__getitem__) if best else "fcfs"
    best["fcfs"] = q
    return {"queue_qps": round(q, 4), "queue_ceiling_qps": round(fcfs.highest(lambda _: 1.0), 4),
            "queue_speed": round(fluid(q), 4), "requests": requests,
            "queue_best_qps": round(max(q, best[order]), 4),
            "queue_best_order": order if best[order] > q else "fcfs",
            "queue_order_qps": {o: round(v, 4) for o, v in best.items()},
            "aging": cfg.duet_aging}


def checked_queue_bound(cfg: SimConfig, requests: int, target: float = 0.9,
                        orders: Sequence[str] = ()) -> dict[str, Any]:
    """`queue_bound` at ``requests`` and twice that, by the capacity runs' run-length rule
    (`search.run_length`): the longer run's figures where its ``queue_qps`` fell by more than
    `search.LENGTH_TOL`, else the shorter's; ``run_length``: the check."""
    ideal = _Ideal(cfg)
    short = queue_bound(cfg, requests, target, ideal, orders)
    long = queue_bound(cfg, 2 * requests, target, ideal, orders)
    check = run_length(short["queue_qps"], long["queue_qps"], 2 * requests)
    return {**(long if check["sets_figure"] else short), "run_length": check}
