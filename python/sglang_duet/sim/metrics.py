"""Per-run metrics from the requests' token runs and the replicas' step logs.

* TTFT: first token time - arrival. E2E: last token time - arrival. With the front-end cost on
  (`SimConfig.frontend`) token times are the client's (`frontend.FrontEnd.deliver`); gap
  attribution stays on the scheduler's step log.
* TBT: every gap between consecutive output tokens of a request (look-ahead steps included; a
  preemption's gap spans the recomputation). Percentiles use numpy's linear interpolation.
* Duration: first arrival to last completion. Throughputs and goodput divide by it.
* SLO attainment: share of completed requests whose own P99 TBT <= tau (requests with a single
  output token have no gap and count as meeting it). Goodput: completed requests per second
  that met both the TTFT SLO and that TBT condition. ``slo_both_attainment``: share of *all*
  requests (rejected ones count as misses) meeting both -- the capacity benchmark's criterion.
* Mode share: iterations per mode over all iterations of all replicas, with a mixed batch
  ``aggregated``, a batch with no prompt tokens ``decode_only`` and one with no decodes
  ``prefill_only`` whatever the planner called them; ``mean_sms_decode`` / ``mean_lookahead``
  average the spatial iterations.
* Gaps over tau: the scheduler's (step-log times, before the front end) and, in
  ``gap_causes``, how many each cause explains (``attribution.py``); ``client_gaps_over_tau``
  counts the client's.
"""

from __future__ import annotations

import numpy as np

from .attribution import gap_causes
from .engine import SimResult

__all__ = ["RESULT_KEYS", "summarize", "token_times"]

RESULT_KEYS = ("completed", "throughput_rps", "output_tps", "ttft_p50_ms", "ttft_p99_ms",
               "tbt_p50_ms", "tbt_p99_ms", "tbt_max_ms", "slo_attainment", "goodput_rps",
               "mode_share")


def token_times(res: SimResult, client: bool = True) -> tuple[np.ndarray, np.ndarray, list]:
    """(times, owner index into the completed list, completed requests), tokens in order; with a
    front end (`SimResult.frontend`) and `client`, the times the client receives them."""
    steps = [np.frombuffer(rep.steps, dtype=np.float64) if len(rep.steps) else np.empty(0)
             for rep in res.replicas]
    done = [r for r in res.requests if r.finish_s >= 0.0]
    parts: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    for j, r in enumerate(done):
        for rep, t0, s0, s1 in r.runs:
            seg = steps[rep][s0:s1]
            if t0 >= 0.0:
                seg = np.concatenate(([t0], seg))
            parts.append(seg)
            owners.append(np.full(seg.size, j, np.int64))
    if not parts:
        return np.empty(0), np.empty(0, np.int64), done
    times, owner = np.concatenate(parts), np.concatenate(owners)
    return (delivered(res, times, owner, done) if client else times), owner, done


def delivered(res: SimResult, times: np.ndarray, owner: np.ndarray, done: list) -> np.ndarray:
    """Client-side times of scheduler-side token `times` (unchanged without a front end)."""
    fe = res.frontend
    if fe is None or not times.size:
        return times
    out = times.copy()
    server = np.array([r.server for r in done], np.int64)[owner]
    for e in np.unique(server):  # every token of a front-end server at once: one process
        sel = server == e
        out[sel] = fe.deliver(int(e), times[sel])
    return out


def _pct(x: np.ndarray, q: float) -> float | None:
    return float(np.percentile(x, q)) * 1e3 if x.size else None


def _per_request_p99(gaps: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """P99 of each request's gaps (linear interpolation); 0 for requests without gaps."""
    out = np.zeros(n)
    if gaps.size == 0:
        return out
    order = np.lexsort((gaps, owner))
    g = gaps[order]
    cnt = np.bincount(owner, minlength=n)
    off = np.concatenate(([0], np.cumsum(cnt)[:-1]))
    has = cnt > 0
    h = 0.99 * (cnt[has] - 1)
    lo = np.floor(h).astype(np.int64)
    hi = np.minimum(lo + 1, cnt[has] - 1)
    base = off[has]
    out[has] = g[base + lo] + (h - lo) * (g[base + hi] - g[base + lo])
    return out


def summarize(res: SimResult, tbt_slo_s: float, ttft_slo_s: float) -> dict[str, object]:
    sched, owner, done = token_times(res, client=False)
    times = delivered(res, sched, owner, done)
    n = len(done)
    counts = np.bincount(owner, minlength=n) if n else np.zeros(0, np.int64)
    expected = np.array([r.output_len for r in done], np.int64)
    tokens_ok = bool(np.array_equal(counts, expected))
    same = owner[1:] == owner[:-1]
    gaps_all = np.diff(times)
    gaps = gaps_all[same]
    gap_owner = owner[1:][same]
    arrival = np.array([r.arrival_s for r in done])
    first = np.array([r.first_token_s for r in done])
    finish = np.array([r.finish_s for r in done])
    if res.frontend is not None and n:  # what the client sees: the delivered tokens
        start = np.concatenate(([0], np.cumsum(counts)[:-1]))
        first, finish = times[start], times[start + counts - 1]
    ttft = first - arrival
    e2e = finish - arrival
    p99 = _per_request_p99(gaps, gap_owner, n)
    all_arrivals = [r.arrival_s for r in res.requests]
    duration = (float(finish.max()) - min(all_arrivals)) if n else 0.0
    per_s = 1.0 / duration if duration > 0 else 0.0
    out_tokens = int(expected.sum()) if n else 0
    in_tokens = int(sum(r.prompt_len for r in done))
    meets_tbt = p99 <= tbt_slo_s + 1e-12
    good = int(np.count_nonzero(meets_tbt & (ttft <= ttft_slo_s + 1e-12)))
    n_all = len(res.requests)

    iters: dict[str, int] = {}
    sd = k = spatial = busy = 0.0
    for rep in res.replicas:
        for mode, c in rep.mode_iters.items():
            iters[mode] = iters.get(mode, 0) + c
        spatial += rep.spatial_iters
        sd += rep.sd_sum
        k += rep.k_sum
        busy += rep.busy_s
    total_iters = sum(iters.values())
    share = {m: round(c / total_iters, 4) for m, c in sorted(iters.items())} if total_iters else {}
    rnd = _rounder
    return {
        "completed": n,
        "rejected": sum(1 for r in res.requests if r.rejected),
        "duration_s": rnd(duration),
        "throughput_rps": rnd(n * per_s),
        "output_tps": rnd(out_tokens * per_s),
        "total_tps": rnd((in_tokens + out_tokens) * per_s),
        "ttft_mean_ms": rnd(float(ttft.mean()) * 1e3 if n else None),
        "ttft_p50_ms": rnd(_pct(ttft, 50)),
        "ttft_p90_ms": rnd(_pct(ttft, 90)),
        "ttft_p99_ms": rnd(_pct(ttft, 99)),
        "ttft_max_ms": rnd(float(ttft.max()) * 1e3 if n else None),
        "tbt_mean_ms": rnd(float(gaps.mean()) * 1e3 if gaps.size else None),
        "tbt_p50_ms": rnd(_pct(gaps, 50)),
        "tbt_p90_ms": rnd(_pct(gaps, 90)),
        "tbt_p99_ms": rnd(_pct(gaps, 99)),
        "tbt_max_ms": rnd(float(gaps.max()) * 1e3 if gaps.size else None),
        "e2e_p50_ms": rnd(_pct(e2e, 50)),
        "e2e_p90_ms": rnd(_pct(e2e, 90)),
        "e2e_p99_ms": rnd(_pct(e2e, 99)),
        "slo_attainment": rnd(float(meets_tbt.mean()) if n else None),
        "goodput_rps": rnd(good * per_s),
        "slo_both_attainment": rnd(good / n_all if n_all else None),
        "mode_share": share,
        "iterations": total_iters,
        "planner_calls": sum(rep.plans for rep in res.replicas),
        "mean_sms_decode": rnd(sd / spatial if spatial else None),
        "mean_lookahead": rnd(k / spatial if spatial else None),
        "preemptions": sum(rep.preemptions for rep in res.replicas),
        "kv_peak_use": rnd(max(rep.kv.peak_used / rep.kv.num_pages for rep in res.replicas)),
        "gpu_busy_share": rnd(busy / (duration * len(res.replicas)) if duration else None),
        "kv_transfers": res.transfers,
        "kv_transfer_s": rnd(res.transfer_s),
        "gaps_over_tau": int(np.count_nonzero(
            (np.diff(sched)[same] if res.frontend is not None else gaps) > tbt_slo_s + 1e-12)),
        "client_gaps_over_tau": int(np.count_nonzero(gaps > tbt_slo_s + 1e-12)),
        "gap_causes": gap_causes(res, tbt_slo_s),
        "tokens_conserved": tokens_ok,
        "sim_wall_s": rnd(res.wall_s),
    }


def _rounder(x: float | None, nd: int = 4) -> float | None:
    if x is None:
        return None
    return float(round(x, nd))
