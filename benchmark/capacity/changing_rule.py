"""The pass rule of a changing workload, from each request's own outcome.

A run of a phased workload (``sglang_duet.sim.phases``) passes when

1. it keeps up over its window (the arrivals between the first and the last 10% of requests,
   ``sglang_duet.sim.steady``'s): admitted >= 0.97x offered (first tokens inside the window
   over its arrivals). The steady-state rule's other half, a TTFT rise <= 1 s across the
   window, is computed (``ttft_rise_s``, ``steady_keeps_up``: both halves) but does not gate:
   under a profile the window starts and ends at different loads and mixes, so TTFT rises
   with no queue growing (daily-drift, duet at load scale 1.16: a rise of 1.0 s at 99.3% of
   requests meeting both SLOs, every phase >= 98%, admissions 1.000x arrivals). A queue that
   grows within a phase shows as that phase's TTFT misses (3.), and one that grows over the
   whole profile as a lower capacity with the profile played twice (the run-length check,
   ``changing.py``);
2. >= 90% of the window's requests meet both SLOs (their own P99 TBT <= 100 ms, TTFT <= 10 s;
   rejected requests miss);
3. so does every phase: >= 90% of each phase's window requests meet both. Without this the
   prefill-heavy phases of a mix could fail entirely unseen (the switch workload's Mooncake
   phases are 1.7% of its requests), and a queue that outgrows a phase's capacity within its
   60 s shows as TTFT misses. Phases with fewer than ``MIN_PHASE`` window requests are reported
   but not held to it (a share of a handful of requests says nothing).

Each phase also gets the steady-state statistics over its own span (its first to last window
arrival: admitted ratio over any requests, TTFT rise of its own), reported, not gating: a
Mooncake phase holds about 100 requests whose TTFTs spread over seconds, so its least-squares
TTFT rise has a noise of about 1 s, the rule's whole limit.

Everything is computed from per-request arrays (arrival, TTFT, met) so a run made of several
simulations (the per-phase oracle: each phase run on its own) is judged by the same code as one
simulation. Times in seconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sglang_duet.sim.engine import SimResult
from sglang_duet.sim.metrics import token_times
from sglang_duet.sim.steady import SERVED_MIN, _ends, _gaps, keeps_up, slope, window_bounds

__all__ = ["MIN_PHASE", "judge", "outcomes", "timeline"]

MIN_PHASE = 20


def outcomes(res: SimResult, tbt_slo_s: float, ttft_slo_s: float) -> dict[str, list]:
    """Per request in workload order: ``ttft`` (s, as the client sees it; -1 when it never got
    a token or was rejected) and ``met`` (both SLOs), JSON-ready (TTFT rounded to 0.1 ms)."""
    times, owner, done = token_times(res)
    has, first, _ = _ends(times, owner, len(done))
    p99 = _gaps(times, owner, len(done))[2]
    n = len(res.requests)
    ttft = np.full(n, -1.0)
    met = np.zeros(n, bool)
    for j, r in enumerate(done):
        if has[j] and not r.rejected:
            ttft[r.idx] = first[j] - r.arrival_s
            met[r.idx] = bool(p99[j] <= tbt_slo_s + 1e-12 and ttft[r.idx] <= ttft_slo_s + 1e-12)
    return {"ttft": [round(float(x), 4) for x in ttft], "met": [int(m) for m in met]}


def _span_stats(arrival: np.ndarray, ttft: np.ndarray, sel: np.ndarray, ttft_slo_s: float
                ) -> dict[str, Any]:
    """``steady.steady_state``'s keep-up statistics over the span of the ``sel`` requests:
    first tokens of any request inside it over its arrivals, and their TTFT rise."""
    a = arrival[sel]
    t0, t1 = float(a.min()), float(a.max())
    got = ttft >= 0
    first = arrival + ttft
    admitted = int(np.count_nonzero(got & (first >= t0) & (first <= t1)))
    ratio = admitted / int(sel.sum())
    own = sel & got
    rise = slope(arrival[own], ttft[own]) * (t1 - t0)
    return {"span_s": [round(t0, 3), round(t1, 3)], "admitted_ratio": round(ratio, 4),
            "ttft_rise_s": round(rise, 4), "keeps_up": keeps_up(ratio, rise, ttft_slo_s)}


def judge(arrival: np.ndarray, ttft: np.ndarray, met: np.ndarray, phase: np.ndarray,
          n_phases: int, ttft_slo_s: float, target: float = 0.9, warmup: float = 0.1,
          tail: float = 0.1) -> dict[str, Any]:
    """The module's rule: ``keeps_up``, ``attainment`` (the window's), ``phases_ok`` and
    ``passes``, with the per-phase breakdown (``phases``). Arrays are per request in arrival
    order; ``ttft`` is -1 for a request without a first token."""
    n = arrival.size
    lo, hi = window_bounds(n, warmup, tail)
    win = np.zeros(n, bool)
    win[lo:hi] = True
    whole = _span_stats(arrival, ttft, win, ttft_slo_s)
    att = float(met[win].mean())
    rows = []
    for p in range(n_phases):
        sel = win & (phase == p)
        k = int(sel.sum())
        row: dict[str, Any] = {"phase": p, "window_requests": k, "requests": int(
            np.count_nonzero(phase == p))}
        if k >= 2:
            t = ttft[sel]
            served = t[t >= 0]
            row.update(attainment=round(float(met[sel].mean()), 4),
                       ttft_p99_s=round(float(np.percentile(served, 99)), 3) if served.size
                       else None,
                       ttft_max_s=round(float(served.max()), 3) if served.size else None,
                       unserved=int(k - served.size), **_span_stats(arrival, ttft, sel,
                                                                    ttft_slo_s))
        row["gating"] = k >= MIN_PHASE
        rows.append(row)
    phases_ok = all(r["attainment"] >= target for r in rows if r["gating"])
    up = bool(whole["admitted_ratio"] >= SERVED_MIN)
    return {"window_requests": int(win.sum()), "attainment": round(att, 4),
            "admitted_ratio": whole["admitted_ratio"], "ttft_rise_s": whole["ttft_rise_s"],
            "keeps_up": up, "steady_keeps_up": whole["keeps_up"], "phases_ok": bool(phases_ok),
            "passes": bool(up and att >= target and phases_ok),
            "worst_phase": min((r for r in rows if r["gating"]),
                               key=lambda r: r["attainment"], default={"phase": None})["phase"],
            "phases": rows}


def timeline(arrival: np.ndarray, met: np.ndarray, bin_s: float, end_s: float
             ) -> list[float | None]:
    """Share of requests meeting both SLOs per ``bin_s``-second bin of arrival time over
    [0, ``end_s``) (None for an empty bin): the plot of attainment against time."""
    bins = np.arange(0.0, end_s + 1e-9, bin_s)
    idx = np.clip(np.digitize(arrival, bins) - 1, 0, len(bins) - 2)
    out: list[float | None] = []
    for b in range(len(bins) - 1):
        sel = idx == b
        out.append(round(float(met[sel].mean()), 4) if sel.any() else None)
    return out
