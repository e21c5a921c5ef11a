"""The requests one load point replays, identically through bench_serving and the simulator.

Lengths: one draw of `pool` requests from the Azure 2023 conversation trace
(`benchmark.serving.convert.sample`: uniform, seeded, kept in trace order), both lengths scaled
by `scale` and rounded (`convert.scale_lengths`: input >= 1, output >= 2). A load point replays
the first `num_requests` of that draw, so points differ in rate and count only.

Arrivals: `convert`'s `poisson-replay` rule, the simulator's own Poisson draw
(`sglang_duet.sim.arrivals.poisson_times`: seeded exponential gaps at rate `qps`, the first
request at t = 0; the same draws at every point, scaled by 1 / qps). bench_serving sends these
timestamps (`--trace-timestamps`, its own `use_trace_timestamps` branch) and the simulator gets
the same times and lengths as a `Workload`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from benchmark.serving.convert import (
    PromptBuilder,
    ReplayRequest,
    convert,
    sample,
    write_jsonl,
)
from benchmark.serving.traces import load_trace
from sglang_duet.sim.arrivals import Workload

TRACE = "azure_conv"


@dataclass(frozen=True)
class LoadPoint:
    qps: float
    num_requests: int


def build_point(point: LoadPoint, tokenizer, scale: float, max_len: int | None, seed: int,
                pool: int, builder: PromptBuilder | None = None
                ) -> tuple[list[ReplayRequest], dict]:
    """The point's requests with their timestamps (ms from the first), and conversion info:
    the first `num_requests` of one draw of `pool` requests."""
    if point.num_requests > pool:
        raise ValueError(f"{point.num_requests} requests from a pool of {pool}")
    reqs = sample(load_trace(TRACE), pool, "uniform", seed)[: point.num_requests]
    return convert(reqs, tokenizer, scale, max_len, "poisson-replay", point.qps, seed, builder)


def write_point(rows: list[ReplayRequest], work: str, name: str) -> str:
    path = os.path.join(work, f"requests_{name}.jsonl")
    write_jsonl(path, rows)
    return path


def to_workload(rows: list[ReplayRequest], description: str) -> Workload:
    """The simulator's view of the same requests (seconds, tokens)."""
    arr = np.array([r.timestamp_ms for r in rows], np.float64) / 1e3
    return Workload(arr - arr[0], np.array([r.prompt_len for r in rows], np.int64),
                    np.array([r.output_len for r in rows], np.int64), description)
