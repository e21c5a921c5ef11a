"""Arrival processes: replay a trace's timestamps, or Poisson at a QPS with the trace's lengths.

Sampling rule for "N requests of a trace" (fixed, seeded, documented in benchmark/traces/README):

* with a QPS: N requests drawn uniformly without replacement with
  ``numpy.random.default_rng(seed)``, in the random order of that draw (a trace's mix drifts
  along it -- Mooncake's mean prompt falls from 13.7K to 11.0K tokens over its five fifths,
  Azure-Conv's output from 254 to 140 tokens and back -- and a steady-state window must see the
  same mix throughout, ``sim.steady``); more than the trace holds are drawn with replacement
  (a many-GPU cluster's steady-state run outlasts a trace); Poisson arrivals at rate QPS drawn from
  ``numpy.random.default_rng([seed, 1])``, the first at t = 0;
* with the trace's own timestamps: the first N requests (a contiguous window keeps the
  trace's burstiness and rate).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .traces import Trace

__all__ = ["Workload", "build_arrivals", "fixed_workload", "poisson_times"]


def poisson_times(n: int, qps: float, seed: int = 0) -> np.ndarray:
    """The module's Poisson rule: n arrival times (s) at rate qps, the first at t = 0 (also
    what `benchmark.serving.convert` sends with ``--arrival poisson-replay``)."""
    gaps = np.random.default_rng([seed, 1]).exponential(1.0 / qps, size=n)
    return np.cumsum(gaps) - gaps[0]


@dataclass(frozen=True, eq=False)
class Workload:
    """The requests one simulation replays: arrival times (s) and token counts."""

    arrival_s: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    description: str
    hash_ids: list[list[int]] | None = None  # per request, the prompt's block hashes (if known)

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    def summary(self) -> dict[str, object]:
        n = len(self)
        span = float(self.arrival_s[-1] - self.arrival_s[0]) if n > 1 else 0.0
        return {
            "description": self.description,
            "requests": n,
            "mean_input": round(float(self.input_len.mean()), 1) if n else 0.0,
            "mean_output": round(float(self.output_len.mean()), 1) if n else 0.0,
            "arrival_span_s": round(span, 3),
            "offered_rps": round((n - 1) / span, 4) if span > 0 else None,
        }


def build_arrivals(
    trace: Trace, qps: float | None = None, num_requests: int | None = None, seed: int = 0
) -> Workload:
    """Apply the module's sampling rule; ``qps=None`` replays the trace's own timestamps."""
    total = len(trace)
    n = total if num_requests is None else int(num_requests)
    if n < 1:
        raise ValueError("num_requests must be >= 1")
    if n > total and qps is None:
        raise ValueError(f"num_requests={n} exceeds the trace's {total} requests")
    if qps is None:
        arr = trace.arrival_s[:n] - trace.arrival_s[0]
        desc = f"{trace.name}: first {n} of {total} requests, trace timestamps"
        hashes = None if trace.hash_ids is None else list(trace.hash_ids[:n])
        return Workload(arr.copy(), trace.input_len[:n].copy(), trace.output_len[:n].copy(), desc,
                        hashes)
    if not qps > 0:
        raise ValueError("qps must be > 0")
    idx = np.random.default_rng(seed).choice(total, size=n, replace=n > total)
    arr = poisson_times(n, qps, seed)
    picked = (f"{n} of {total} requests (uniform, seed {seed})" if n < total
              else f"all {n} requests (shuffled, seed {seed})" if n == total
              else f"{n} draws with replacement from {total} requests (seed {seed})")
    desc = f"{trace.name}: {picked}, Poisson {qps:g} req/s"
    hashes = None if trace.hash_ids is None else [trace.hash_ids[i] for i in idx]
    return Workload(arr, trace.input_len[idx].copy(), trace.output_len[idx].copy(), desc, hashes)


def fixed_workload(
    input_len: int, output_len: int, qps: float, num_requests: int, seed: int = 0
) -> Workload:
    """Synthetic fixed-length requests with Poisson arrivals (Observation 3's 8000/200 load)."""
    arr = poisson_times(num_requests, qps, seed)
    ones = np.ones(num_requests, dtype=np.int64)
    desc = f"fixed {input_len}/{output_len} tokens, Poisson {qps:g} req/s"
    return Workload(arr, ones * input_len, ones * output_len, desc)
