"""The published end-to-end serving runs of ``benchmark/latency_model/e2e/reference.csv`` as
simulator runs: one `Case` per row, its workload, its `SimConfig`, and the metrics the published
benchmark client reports, computed the client's way from the simulated token times.

Metrics (as ``vllm bench serve`` / ``sglang.bench_serving`` define them): request throughput =
completed / (last completion - first arrival); TTFT per request; TPOT per request = (last token -
first token) / (output tokens - 1), over requests with more than one output token; ITL = every
gap between consecutive tokens of a request, pooled. Mean and median of each.

Workloads: ``random`` and ``sharegpt`` rows are fixed-length requests whose lengths add up to the
published totals (an integer split of the mean; the source gives no ShareGPT length
distribution), sent all at t = 0 (request rate ``inf``) or as Poisson arrivals at the row's rate
(the clients' default); ``mooncake`` and ``azure-code`` are the project's traces, sampled the
way ``benchmark/paper`` samples them.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, fields, replace

import numpy as np

from sglang_duet.sim import SimConfig, Workload, build_arrivals, load_trace, simulate
from sglang_duet.sim.metrics import token_times
from sglang_duet.sim.policies import PolicySpec, get_policy

__all__ = ["METRICS", "Case", "case_config", "case_spec", "case_workload", "read_cases",
           "run_case", "sim_metrics"]

METRICS = ("throughput_rps", "ttft_mean_ms", "ttft_median_ms", "tpot_mean_ms", "tpot_median_ms",
           "itl_mean_ms", "itl_median_ms")
TRACE_WORKLOADS = ("mooncake", "azure-code", "azure-conv")


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    model: str
    gpu: str
    tp: int
    gpus: int
    engine: str
    policy: str
    token_budget: int
    prefix_cache: bool
    mem_fraction: float
    frontend: bool  # False: an in-process engine run (no HTTP server, no streaming)
    workload: str
    num_prompts: int
    input_len: float | None
    output_len: float | None
    request_rate: float | None  # None: all at once (rate inf)
    published: dict[str, float]
    not_comparable: tuple[str, ...]

    @property
    def flavor(self) -> str:
        return case_spec(self).flavor


def _num(raw: str) -> float | None:
    raw = (raw or "").strip()
    return float(raw) if raw else None


def read_cases(path: str | os.PathLike) -> list[Case]:
    """Rows of the e2e reference CSV; ValueError naming the line of a bad row."""
    out: list[Case] = []
    with open(path, newline="", encoding="utf-8") as f:
        for lineno, r in enumerate(csv.DictReader(f), start=2):
            try:
                out.append(_case(r))
            except (KeyError, ValueError) as e:
                raise ValueError(f"{path}:{lineno}: {e}") from None
    if not out:
        raise ValueError(f"{path}: no rows")
    return out


def _case(r: dict[str, str]) -> Case:
    if not (r.get("source") or "").strip():
        raise ValueError(f"row {r.get('id')!r} has no source")
    n = int(r["num_prompts"])
    published = {m: v for m in METRICS if (v := _num(r.get(m, ""))) is not None}
    duration = _num(r.get("duration_s", ""))
    if duration:  # the published duration has more digits than the rounded req/s
        published["throughput_rps"] = n / duration
    if not published:
        raise ValueError(f"row {r['id']}: no published metric")
    rate = (r["request_rate"] or "").strip()
    skip = tuple(x.strip() for x in (r.get("not_comparable") or "").split(";") if x.strip())
    return Case(r["id"].strip(), r["source"].strip(), r["model"].strip(), r["gpu"].strip(),
                int(r["tp"]), int(r["gpus"]), r["engine"].strip(), r["sim_policy"].strip(),
                int(r["token_budget"]), r["prefix_cache"].strip() == "on",
                float(r["mem_fraction"]), (r.get("frontend") or "http").strip() != "engine",
                r["workload"].strip(), n, _num(r["input_len"]),
                _num(r["output_len"]), None if rate in ("", "inf") else float(rate), published,
                skip)


def case_spec(c: Case) -> PolicySpec:
    """The simulator policy: a registry name, or ``vllm-v0`` (vLLM's V0 engine without chunked
    prefill: prefill-first batches like SGLang's default, vLLM's memory behaviour)."""
    if c.policy == "vllm-v0":
        return replace(get_policy("sglang-default"), name="vllm-v0", flavor="vllm",
                       description="vLLM V0: prefill-first, no chunked prefill")
    return get_policy(c.policy)


def _lengths(mean: float, n: int) -> np.ndarray:
    """n integer lengths whose sum is round(mean * n) (floor for most, floor + 1 for the rest)."""
    total = int(round(mean * n))
    base = total // n
    out = np.full(n, base, np.int64)
    out[: total - base * n] += 1
    return out


def case_workload(c: Case, seed: int = 0) -> Workload:
    if c.workload in TRACE_WORKLOADS:
        n = None if c.workload == "azure-code" and c.num_prompts >= 8819 else c.num_prompts
        return build_arrivals(load_trace(c.workload), c.request_rate, n, seed)
    if c.input_len is None or c.output_len is None:
        raise ValueError(f"{c.id}: a {c.workload} row needs input_len and output_len")
    n = c.num_prompts
    if c.request_rate is None:
        arr = np.zeros(n)
    else:
        gaps = np.random.default_rng([seed, 1]).exponential(1.0 / c.request_rate, size=n)
        arr = np.cumsum(gaps) - gaps[0]
    rate = "inf" if c.request_rate is None else f"{c.request_rate:g}"
    return Workload(arr, _lengths(c.input_len, n), _lengths(c.output_len, n),
                    f"{c.id}: {n} x {c.input_len:g}/{c.output_len:g} tokens, rate {rate}")


def case_config(c: Case, **switches: object) -> SimConfig:
    """The row's setup; ``switches`` override `SimConfig` fields (the costs under test)."""
    known = {f.name for f in fields(SimConfig)}
    bad = sorted(set(switches) - known)
    if bad:
        raise ValueError(f"unknown SimConfig fields {bad}")
    base = dict(trace=c.workload, policy=c.policy if c.policy != "vllm-v0" else "sglang-default",
                model=c.model, hardware=c.gpu, gpus=c.gpus, tp=c.tp, qps=c.request_rate,
                num_requests=c.num_prompts, token_budget=c.token_budget,
                mem_fraction=c.mem_fraction)
    base["prefix_cache"] = c.prefix_cache
    base["frontend"] = c.frontend
    # the published multi-replica runs spread requests round-robin (where they say), and the
    # front-end costs were fitted so: not each system's own default router (SimConfig.router)
    base["router"] = "round-robin"
    if c.policy == "vllm-v0":  # V0's SchedulerConfig max_num_seqs 256; graphs up to 256
        base.update(max_running=256, graph_max_bs=256)
    return SimConfig(**{**base, **switches})


def sim_metrics(res) -> dict[str, float | None]:
    """The published clients' metrics from a SimResult (see the module docstring)."""
    times, owner, done = token_times(res)
    n = len(done)
    if not n:
        return dict.fromkeys(METRICS)
    counts = np.bincount(owner, minlength=n)
    start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    first, last = times[start], times[start + counts - 1]
    arrival = np.array([r.arrival_s for r in done])
    ttft = (first - arrival) * 1e3
    multi = counts > 1
    tpot = (last[multi] - first[multi]) / (counts[multi] - 1) * 1e3
    same = owner[1:] == owner[:-1]
    itl = np.diff(times)[same] * 1e3
    duration = float(last.max() - min(r.arrival_s for r in res.requests))

    def stat(x: np.ndarray, f) -> float | None:
        return float(f(x)) if x.size else None

    return {"throughput_rps": n / duration if duration > 0 else None,
            "ttft_mean_ms": stat(ttft, np.mean), "ttft_median_ms": stat(ttft, np.median),
            "tpot_mean_ms": stat(tpot, np.mean), "tpot_median_ms": stat(tpot, np.median),
            "itl_mean_ms": stat(itl, np.mean), "itl_median_ms": stat(itl, np.median)}


def run_case(c: Case, **switches: object) -> dict[str, float | None]:
    cfg = case_config(c, **switches)
    return sim_metrics(simulate(cfg, case_workload(c, cfg.seed), case_spec(c)))
