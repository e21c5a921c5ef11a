"""Steady state of one run: does the system keep up with the load it is offered, and how well?

A short run at an overload still finishes every request (the queue drains after the last
arrival), and the share meeting the SLOs only falls once the queue has grown past the TTFT SLO,
so the end-to-end share hides a growing queue. Everything here is measured over a *window*: the
arrivals of requests ``warmup * N`` to ``(1 - tail) * N`` (by arrival order). The first
requests meet an empty system, the last ones one that drains (nothing arrives after them).

* ``offered_rps`` = window requests / window length; ``served_rps`` = requests (of any arrival)
  completed inside the window / window length; ``served_ratio`` their ratio.
  ``admitted_ratio``: requests (of any arrival) whose first token reached the client inside the
  window, over the window's requests. By conservation, completions = admissions minus the growth
  of the in-service population, and that population ramps up for as long as the longest
  sojourns of the first requests: 10% of a 4,000-request azure-conv run (11 s) is shorter than
  its P90 sojourn (about 20 s), and at duet's 36.5 req/s the in-service count rose by 95 requests
  across the window while the queue rose by 8 (served 0.967, admitted 0.997, TTFT flat). The
  served ratio thus charges a policy for long service times (slow decode), not for a growing
  queue; the admitted ratio sees the queue only. A running set that keeps growing fills the KV
  pool, and admission then stalls, which the admitted ratio and the run-length check see.
* ``ttft_rise_s``: the least-squares slope of TTFT against arrival time over the window's
  requests, times the window length: how much TTFT grew across the window.
* ``keeps_up``: ``admitted_ratio >= SERVED_MIN`` and ``ttft_rise_s <= RISE_MAX_SHARE x`` the TTFT
  SLO. A run that keeps up has a queue that is not growing.
* ``attainment``: share of the window's requests (rejected ones count as misses) whose own P99
  TBT <= tau and TTFT <= the TTFT SLO. The capacity rule (``benchmark.capacity``): a QPS passes
  when the run keeps up and ``attainment >= 0.9``.
* ``sched_delay_p50_s`` / ``_p99_s``: arrival to the first prefill chunk (Sarathi-Serve's
  scheduling delay), over the window; ``tbt_p99_s``: P99 of every inter-token gap in the window.
  Sarathi-Serve's own capacity search passes a QPS when the median scheduling delay <= 2 s and
  the P99 TBT <= its SLO (``sarathi/benchmark/capacity_search/main.py``: quantile 0.50, value
  2.0; TBT quantile 0.99): ``sarathi_ok``.
* Fairness (issue #48: an admission order may not win by parking long prompts):
  ``ttft_p99_s`` and ``ttft_max_s`` over the window's served requests, and
  ``long_tenth_attainment``: the share of the window's longest-prompt tenth (prompts at or above
  the window's 90th percentile length; rejected ones count as misses) whose TTFT meets its SLO.

Times are seconds, rates requests per second.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .engine import SimResult
from .metrics import _per_request_p99, token_times

__all__ = ["RISE_MAX_SHARE", "SARATHI_DELAY_S", "SERVED_MIN", "keeps_up", "miss_causes", "slope",
           "steady_state", "window_bounds"]

SERVED_MIN = 0.97  # served / offered over the window
RISE_MAX_SHARE = 0.1  # of the TTFT SLO: TTFT may rise at most this much across the window
SARATHI_DELAY_S = 2.0  # median scheduling delay bound of Sarathi-Serve's capacity search


def steady_state(res: SimResult, tbt_slo_s: float, ttft_slo_s: float, warmup: float = 0.1,
                 tail: float = 0.1) -> dict[str, Any]:
    """The window statistics of the module docstring (JSON-ready, rounded)."""
    win = _window(res, warmup, tail)
    t0, t1 = win[0].arrival_s, win[-1].arrival_s
    span = t1 - t0
    if span <= 0.0:
        raise ValueError("the window's arrivals span no time")
    # token times as the client sees them (after the front end, when it is simulated)
    times, owner, done_all = token_times(res)
    has, first, last = _ends(times, owner, len(done_all))
    finish = last[has]
    served = int(np.count_nonzero((finish >= t0) & (finish <= t1)))
    began = first[has]  # first tokens: admissions (the module docstring)
    admitted = int(np.count_nonzero((began >= t0) & (began <= t1)))
    offered = len(win)

    ids = {id(r) for r in win}
    in_win = np.array([id(r) in ids and not r.rejected for r in done_all], bool) & has
    arrival = np.array([r.arrival_s for r in done_all])
    ttft_all = first - arrival
    arr, ttft = arrival[in_win], ttft_all[in_win]
    rise = slope(arr, ttft) * span
    delay = np.array([r.sched_s - r.arrival_s for j, r in enumerate(done_all)
                      if in_win[j] and r.sched_s >= 0.0])

    # per-request P99 TBT of the window's requests, and every gap they saw
    gaps, gap_owner, p99 = _gaps(times, owner, len(done_all))
    good = int(np.count_nonzero(in_win & (p99 <= tbt_slo_s + 1e-12)
                                & (ttft_all <= ttft_slo_s + 1e-12)))
    win_gaps = gaps[in_win[gap_owner]] if gaps.size else gaps
    tbt_p99 = float(np.percentile(win_gaps, 99)) if win_gaps.size else 0.0
    ratio, admitted_ratio = served / offered, admitted / offered
    up = keeps_up(admitted_ratio, rise, ttft_slo_s)
    d50 = float(np.percentile(delay, 50)) if delay.size else 0.0
    d99 = float(np.percentile(delay, 99)) if delay.size else 0.0
    r4 = _round
    plen = np.array([r.prompt_len for r in win])
    long = {id(r) for r in win if r.prompt_len >= np.percentile(plen, 90)}
    long_ok = sum(1 for j, r in enumerate(done_all) if id(r) in long and in_win[j]
                  and ttft_all[j] <= ttft_slo_s + 1e-12)
    return {
        "window_s": [r4(t0), r4(t1)],
        "window_requests": offered,
        "offered_rps": r4(offered / span),
        "served_rps": r4(served / span),
        "served_ratio": r4(ratio),
        "admitted_ratio": r4(admitted_ratio),
        "ttft_rise_s": r4(rise),
        "ttft_mean_s": r4(float(ttft.mean()) if ttft.size else 0.0),
        "keeps_up": up,
        "attainment": r4(good / offered),
        "sched_delay_p50_s": r4(d50),
        "sched_delay_p99_s": r4(d99),
        "tbt_p99_s": r4(tbt_p99),
        "sarathi_ok": bool(d50 <= SARATHI_DELAY_S and tbt_p99 <= tbt_slo_s + 1e-12),
        "ttft_p99_s": r4(float(np.percentile(ttft, 99)) if ttft.size else 0.0),
        "ttft_max_s": r4(float(ttft.max()) if ttft.size else 0.0),
        "long_tenth_attainment": r4(long_ok / len(long)),
    }


def miss_causes(res: SimResult, tbt_slo_s: float, ttft_slo_s: float, warmup: float = 0.1,
                tail: float = 0.1) -> dict[str, int]:
    """Why the window's requests (`steady_state`'s) miss the SLOs, as counts that add up to
    ``window``: ``met``; ``unserved`` (rejected, or no token); ``ttft`` (TTFT only);
    ``tbt_server`` (P99 TBT over tau in the scheduler's own token times already, TTFT met);
    ``tbt_client`` (P99 TBT over tau only as the client receives the tokens, after the
    simulated front end's delivery; TTFT met); ``both`` (TTFT and TBT). A case whose misses
    are mostly ``tbt_client`` is bound by token delivery, not by the schedule."""
    ids = {id(r) for r in _window(res, warmup, tail)}
    p99 = {}
    for client in (False, True):
        times, owner, done = token_times(res, client)
        has, first, _ = _ends(times, owner, len(done))
        p99[client] = _gaps(times, owner, len(done))[2]
    arrival = np.array([r.arrival_s for r in done])
    in_win = np.array([id(r) in ids and not r.rejected for r in done], bool) & has
    ttft_ok = first - arrival <= ttft_slo_s + 1e-12
    tbt_ok = p99[True] <= tbt_slo_s + 1e-12
    server_ok = p99[False] <= tbt_slo_s + 1e-12
    served = int(np.count_nonzero(in_win))

    def count(mask: np.ndarray) -> int:
        return int(np.count_nonzero(in_win & mask))

    return {"window": len(ids), "met": count(ttft_ok & tbt_ok), "unserved": len(ids) - served,
            "ttft": count(~ttft_ok & tbt_ok), "tbt_server": count(ttft_ok & ~server_ok),
            "tbt_client": count(ttft_ok & ~tbt_ok & server_ok),
            "both": count(~ttft_ok & ~tbt_ok)}


def keeps_up(admitted_ratio: float, rise_s: float, ttft_slo_s: float) -> bool:
    """The keep-up rule (the module docstring): admissions keep pace, TTFT does not climb."""
    return bool(admitted_ratio >= SERVED_MIN and rise_s <= RISE_MAX_SHARE * ttft_slo_s)


def window_bounds(n: int, warmup: float = 0.1, tail: float = 0.1) -> tuple[int, int]:
    """[lo, hi) of the window among ``n`` requests in arrival order: ``warmup * n`` to
    ``(1 - tail) * n``, at least two requests where there are."""
    lo = int(warmup * n)
    return lo, min(max(lo + 2, int(round((1.0 - tail) * n))), n)


def _window(res: SimResult, warmup: float, tail: float) -> list:
    """The window's requests: arrivals ``warmup * N`` to ``(1 - tail) * N``, in arrival order."""
    reqs = sorted(res.requests, key=lambda r: r.arrival_s)
    lo, hi = window_bounds(len(reqs), warmup, tail)
    win = reqs[lo:hi]
    if len(win) < 2:
        raise ValueError(f"a steady-state window needs >= 2 requests, got {len(win)} of "
                         f"{len(reqs)}")
    return win


def _ends(times: np.ndarray, owner: np.ndarray, n: int
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(has tokens, first token time, last token time; -1 without) per completed request."""
    counts = np.bincount(owner, minlength=n)
    start = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    has = counts > 0
    top = max(times.size - 1, 0)
    first = np.where(has, times[np.minimum(start, top)], -1.0)
    last = np.where(has, times[np.minimum(start + counts - 1, top)], -1.0)
    return has, first, last


def _gaps(times: np.ndarray, owner: np.ndarray, n: int
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(every inter-token gap, its request, each request's own P99 gap)."""
    same = owner[1:] == owner[:-1]
    gaps, gap_owner = np.diff(times)[same], owner[1:][same]
    return gaps, gap_owner, _per_request_p99(gaps, gap_owner, n)


def slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of y on x (0 with fewer than two distinct x)."""
    if x.size < 2:
        return 0.0
    dx = x - x.mean()
    var = float(dx @ dx)
    return float(dx @ (y - y.mean())) / var if var > 0.0 else 0.0


def _round(x: float) -> float:
    return float(round(x, 4))
