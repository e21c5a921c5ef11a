"""The simulator's side: each compared system as a policy of `sglang_duet.sim`, run on the same
requests with the CPU profile (`profile.py`), and the one metric function both sides share.

Stock SGLang runs its overlap loop on the CPU too (0.5.17 `managers/scheduler.py`,
`Scheduler.event_loop_overlap`: the result of batch N is processed after `run_batch(N+1)` has
been launched, and `is_disable_overlap_for_batch` keeps that for consecutive prefills by
default). On a GPU the launch returns at once; on the CPU the forward runs inside the launch, so
the tokens of iteration N reach the client when iteration N+1 has finished, when one follows
at once (an idle loop processes the last result straight away). `overlap_emission` applies that
rule to the simulated token times of the stock systems; the duet loop is synchronous (its
`event_loop_normal`, `--disable-overlap-schedule` forced by its launcher).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchmark.sim_to_real.sglang_log import schedule_stats
from sglang_duet.sim import SimConfig
from sglang_duet.sim.arrivals import Workload
from sglang_duet.sim.engine import Simulation
from sglang_duet.sim.metrics import token_times

METRICS = ("ttft_p50_ms", "ttft_p99_ms", "tbt_p50_ms", "tbt_p99_ms", "throughput_rps")


@dataclass(frozen=True)
class SimSystem:
    policy: str
    duet_mode: str = "adaptive"
    overlap: bool = False  # stock SGLang's overlap loop (token emission rule above)
    mixed: bool = True  # extend batches carry the running decodes (mixed chunked prefill)


# Real system name -> its simulator policy (benchmark.serving's names, and this benchmark's
# duet-aggregated); pdmux and duet run synchronous loops (overlap scheduling off).
SIM_SYSTEMS = {
    "sglang-chunked": SimSystem("sglang-chunked", overlap=True),
    "sglang-default": SimSystem("sglang-default", overlap=True, mixed=False),
    "duet-aggregated": SimSystem("duet", duet_mode="aggregated"),
    "duet": SimSystem("duet"),
    "sglang-pdmux": SimSystem("sglang-pdmux", mixed=False),
}


def summarize(ttft_s: np.ndarray, gaps_s: np.ndarray, completed: int, duration_s: float,
              output_tokens: int) -> dict:
    """The compared metrics (numpy's linear percentiles; TBT pools every inter-token gap)."""
    def pct(x: np.ndarray, q: float) -> float | None:
        return round(float(np.percentile(x, q)) * 1e3, 3) if x.size else None

    return {
        "completed": completed, "duration_s": round(duration_s, 3),
        "ttft_p50_ms": pct(ttft_s, 50), "ttft_p99_ms": pct(ttft_s, 99),
        "tbt_p50_ms": pct(gaps_s, 50), "tbt_p99_ms": pct(gaps_s, 99),
        "throughput_rps": round(completed / duration_s, 4) if duration_s > 0 else None,
        "output_tps": round(output_tokens / duration_s, 3) if duration_s > 0 else None,
    }


def _recorder(rep) -> tuple[list[float], list[float], list[tuple[str, int, int, float]]]:
    """Record the replica's iteration starts and ends, and each iteration as (kind, decode
    rows, prefill tokens, seconds), SGLang's log kinds (`sglang_log`): a decode stretch of m
    steps is m decode iterations (wrapping its two methods)."""
    starts: list[float] = []
    ends: list[float] = []
    its: list[tuple[str, int, int, float]] = []
    start0, finish0 = rep.start, rep.finish

    def start(now: float, horizon: float):
        end = start0(now, horizon)
        if end is not None:
            starts.append(now)
        return end

    def finish(now: float) -> None:
        step_times, dreqs, chunks = rep._pending
        t0 = starts[-1] if starts else now
        if chunks:
            its.append(("extend", len(dreqs), sum(n for _, n in chunks), now - t0))
        else:
            prev = [t0, *list(step_times)[:-1]]
            its.extend(("decode", len(dreqs), 0, b - a) for a, b in zip(prev, step_times,
                                                                       strict=True))
        ends.append(now)
        finish0(now)

    rep.start, rep.finish = start, finish
    return starts, ends, its


def overlap_emission(times: np.ndarray, steps: np.ndarray, starts: list[float],
                     ends: list[float]) -> np.ndarray:
    """Token times under the overlap rule: a token produced at the end of an iteration that
    another iteration follows at once is seen when that one ends. Iteration ends are the
    planned ends and every decode step's end; one is followed at once when an iteration started
    then, or it is a step inside a decode stretch (not the stretch's last)."""
    e = np.unique(np.concatenate([np.asarray(ends, np.float64), steps]))
    busy = np.union1d(np.asarray(starts, np.float64), np.setdiff1d(steps, ends))
    nxt = np.searchsorted(e, times, side="right")
    follow = np.isin(times, busy) & (nxt < e.size)
    out = times.copy()
    out[follow] = e[nxt[follow]]
    return out


def simulate_point(system: str, workload: Workload, model: str, hardware: str,
                   calibration: str, token_budget: int, max_total_tokens: int | None,
                   overlap_rule: bool = True, page_size: int | None = None,
                   frontend: bool = False, overrides: dict | None = None) -> dict:
    """Metrics of one simulated run; with `overlap_rule` False the stock systems' tokens keep
    the simulator's own times (the CPU report shows both; on a GPU the rule does not apply).
    `frontend` adds the simulator's per-request front end (fitted to GPU hosts' published runs:
    on for the GPU check; off here, where the CPU profile's measured loop periods already hold
    this host's own per-request work). `overrides`: further `SimConfig` fields (an admission
    order, its TTFT SLO); with them the result also holds each request's TTFT
    (``ttft_ms_by_request``, in workload order, None where it did not finish)."""
    spec = SIM_SYSTEMS[system]
    cfg = SimConfig(trace="-", policy=spec.policy, model=model, hardware=hardware,
                    calibration=calibration, gpus=1, tp=1, token_budget=token_budget,
                    duet_mode=spec.duet_mode, max_total_tokens=max_total_tokens,
                    page_size=page_size, activation_reserve_gb=0.0, frontend=frontend,
                    **(overrides or {}))
    sim = Simulation(cfg, workload)
    (rep,) = sim.replicas
    starts, ends, its = _recorder(rep)
    res = sim.run()
    times, owner, done = token_times(res)
    if spec.overlap and overlap_rule:
        steps = np.frombuffer(rep.steps, np.float64) if len(rep.steps) else np.zeros(0)
        times = overlap_emission(times, steps, starts, ends)
    n = len(done)
    first = np.full(n, np.inf)
    np.minimum.at(first, owner, times)
    arrival = np.array([r.arrival_s for r in done])
    order = np.lexsort((times, owner))
    t, o = times[order], owner[order]
    same = o[1:] == o[:-1]
    gaps = np.diff(t)[same]
    last = float(t.max()) if t.size else 0.0
    out = summarize(first - arrival, gaps, n, last - float(workload.arrival_s.min()),
                    int(sum(r.output_len for r in done)))
    out["preemptions"] = rep.preemptions
    if overrides is not None:
        by_idx: list[float | None] = [None] * len(workload)
        for j, r in enumerate(done):
            by_idx[r.idx] = round(float(first[j] - arrival[j]) * 1e3, 3)
        out["ttft_ms_by_request"] = by_idx
    out["schedule"] = schedule_stats([(k, r, t) for k, r, t, _ in its], spec.mixed)
    out["busy_s"] = busy_by_kind([(k, r, sec) for k, r, _, sec in its], spec.mixed)
    return out


def busy_by_kind(its: list[tuple[str, int, float]], mixed: bool) -> dict:
    """Seconds spent per iteration kind (decode_only, mixed, prefill_only)."""
    out = {"decode_only": 0.0, "mixed": 0.0, "prefill_only": 0.0}
    for kind, rows, sec in its:
        key = "decode_only" if kind == "decode" else ("mixed" if mixed and rows
                                                      else "prefill_only")
        out[key] += sec
    return {k: round(v, 3) for k, v in out.items()}
