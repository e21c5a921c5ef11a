"""What one dispatch decision costs on this CPU: 8 replicas of 256 running requests each.

Three numbers per router, in microseconds (median and P99 over `picks` dispatches):

* ``decision``: `pick` when no report changed since the last dispatch (the common case: reports
  are applied at most every 20 ms, requests arrive far more often under load);
* ``after_report``: `observe` of 8 new reports that change every replica's decode state, then
  `pick` (the duet router re-predicts each replica's costs here);
* ``stream``: a dispatch stream at `rate` requests/s with a report round every 20 ms, each
  dispatch timed with whatever refresh falls on it.
"""

from __future__ import annotations

import time

import numpy as np

from sglang_duet.latency import LatencyModel, get_hardware, get_model
from sglang_duet.router import ReplicaLoad, RouterContext, make_router

__all__ = ["measure"]

REPLICAS, RUNNING = 8, 256


def _loads(rng: np.random.Generator, stamp: float) -> list[ReplicaLoad]:
    out = []
    for i in range(REPLICAS):
        ctx = int(rng.integers(500, 4000)) * RUNNING
        queued = int(rng.integers(0, 40_000))
        out.append(ReplicaLoad(i, RUNNING, int(rng.integers(0, 20)), ctx, queued, ctx + queued,
                               900_000, stamp))
    return out


def _stats(ns: list[int]) -> dict[str, float]:
    a = np.asarray(ns, dtype=np.float64) / 1e3
    return {"median_us": round(float(np.median(a)), 2), "p99_us": round(float(np.percentile(
        a, 99)), 2)}


def measure(router: str, picks: int = 3000, rate: float = 200.0, seed: int = 0) -> dict:
    lm = LatencyModel(get_hardware("h100-sxm"), get_model("qwen3-8b"))
    ctx = RouterContext(latency=lm, tbt_slo_s=0.1, token_budget=8192)
    rng = np.random.default_rng(seed)
    prompts = rng.integers(100, 8000, picks).tolist()
    clock = time.perf_counter_ns

    r = make_router(router, REPLICAS, ctx)
    r.observe(_loads(rng, 0.0), now=0.0)
    r.pick(100)
    decision = []
    for p in prompts:
        t0 = clock()
        r.pick(p)
        decision.append(clock() - t0)

    after = []
    for k, p in enumerate(prompts[: picks // 10]):
        loads = _loads(rng, 1.0 + k)
        t0 = clock()
        r.observe(loads, now=1.0 + k)
        r.pick(p)
        after.append(clock() - t0)

    r = make_router(router, REPLICAS, ctx)
    stream = []
    now = 0.0
    for k, p in enumerate(prompts):
        now += 1.0 / rate
        loads = _loads(rng, float(k)) if r.due(now) else None
        t0 = clock()
        if loads is not None:
            r.observe(loads, now)
        r.pick(p)
        stream.append(clock() - t0)
    return {"router": router, "replicas": REPLICAS, "running_per_replica": RUNNING,
            "picks": picks, "decision": _stats(decision), "after_report": _stats(after),
            "stream": {"rate_rps": rate, "refresh_s": ctx.refresh_s, **_stats(stream)}}
