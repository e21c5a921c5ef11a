"""TBT gap attribution: every inter-token gap over tau is charged to one cause, so a summary shows
where each policy loses its SLO.

A gap runs from token ``a`` to token ``b`` of one request; ``b`` is a decode step of iteration I
(started at ``start_I``) or a token sampled by a recomputation. The gap splits into the time
before I began (``start_I - a``: the request waited for something) and its own step inside I
(``b - max(start_I, a)``). When the own step alone exceeds tau the gap is charged to I's kind;
otherwise the wait pushed it over and the gap is charged to what it waited for. Causes
(``CAUSES``):

* ``preemption``: ``b`` is the token a recomputation samples after the request was retracted
  (the gap spans the retraction and the recompute);
* ``prefill_paused_decode``: the request sat out whole iterations between ``a`` and I, e.g.
  prefill-only batches while it was running (SGLang's default scheduler), or it was left out of
  a plan's decode batch;
* ``waiting_behind_spatial_prefill``: ``a`` was the last decode step of the previous, spatial,
  iteration, and that iteration went on for its prefill after it (a synchronous spatial
  iteration: ``max(k * t_d, t_p)``);
* ``kv_admission``: ``a`` is a first token (prefill sample / 1P1D KV landing) and the request
  waited for the running iteration to end before it could join the decode batch;
* the own step over tau, by I's kind: ``aggregated_over_tau`` (a mixed batch),
  ``spatial_decode_over_tau`` (a decode step on its partition) or ``decode_step_over_tau``
  (decodes alone on the whole GPU).
"""

from __future__ import annotations

import numpy as np

from .engine import SimResult
from .replica import ITER_KINDS

__all__ = ["CAUSES", "gap_causes"]

CAUSES: tuple[str, ...] = (
    "aggregated_over_tau", "decode_step_over_tau", "spatial_decode_over_tau",
    "waiting_behind_spatial_prefill", "prefill_paused_decode", "preemption", "kv_admission",
)
_BY_KIND = {"aggregated": "aggregated_over_tau", "decode_only": "decode_step_over_tau",
            "spatial": "spatial_decode_over_tau", "prefill_only": "prefill_paused_decode"}
_SPATIAL = ITER_KINDS.index("spatial")


def _tokens(res: SimResult) -> tuple[np.ndarray, ...]:
    """Per output token, in the order of ``metrics.token_times``: time, owner, replica, step
    index (-1 for a sampled first token) and run number within its request."""
    steps = [np.frombuffer(rep.steps, dtype=np.float64) if len(rep.steps) else np.empty(0)
             for rep in res.replicas]
    t, own, rp, st, rn = [], [], [], [], []
    done = [r for r in res.requests if r.finish_s >= 0.0]
    for j, r in enumerate(done):
        for n, (rep, t0, s0, s1) in enumerate(r.runs):
            idx = np.arange(s0, s1, dtype=np.int64)
            seg = steps[rep][s0:s1]
            if t0 >= 0.0:
                seg = np.concatenate(([t0], seg))
                idx = np.concatenate(([-1], idx))
            t.append(seg)
            st.append(idx)
            for arr, v in ((own, j), (rp, rep), (rn, n)):
                arr.append(np.full(seg.size, v, np.int64))
    if not t:
        e = np.empty(0, np.int64)
        return np.empty(0), e, e, e, e
    return tuple(np.concatenate(x) for x in (t, own, rp, st, rn))


def gap_causes(res: SimResult, tau_s: float) -> dict[str, int]:
    """Count of gaps over ``tau_s`` (seconds) per cause (every cause listed, zeros included)."""
    out = dict.fromkeys(CAUSES, 0)
    times, owner, rep, step, run = _tokens(res)
    if times.size < 2:
        return out
    gaps = np.diff(times)
    over = np.nonzero((owner[1:] == owner[:-1]) & (gaps > tau_s + 1e-12))[0] + 1
    logs = [(rp.iter_start, rp.iter_kind, rp.step_iter) for rp in res.replicas]
    for g in over.tolist():
        out[_cause(g, times, rep, step, run, logs, tau_s)] += 1
    return out


def _cause(g: int, times, rep, step, run, logs, tau_s: float) -> str:
    b_step = int(step[g])
    if b_step < 0:
        return "preemption"
    if run[g] != run[g - 1] or rep[g] != rep[g - 1]:
        return "prefill_paused_decode"  # left out of the decode batch, run reopened later
    starts, kinds, step_iter = logs[int(rep[g])]
    it = step_iter[b_step]
    start = starts[it]
    a, b = float(times[g - 1]), float(times[g])
    if b - max(start, a) > tau_s + 1e-12 or start <= a:
        return _BY_KIND[ITER_KINDS[kinds[it]]]
    a_step = int(step[g - 1])
    if a_step < 0:
        return "kv_admission"
    prev = step_iter[a_step]
    if prev < it - 1:
        return "prefill_paused_decode"
    if kinds[prev] == _SPATIAL:
        return "waiting_behind_spatial_prefill"
    return _BY_KIND[ITER_KINDS[kinds[it]]]
