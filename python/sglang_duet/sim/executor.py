"""The simulated GPU: how long a BatchPlan takes, from ``sglang_duet.latency.LatencyModel``.

* ``aggregated``: one mixed batch (decode rows, then prefill chunks) on the whole GPU.
* ``decode_only``: the decode batch on the whole GPU, ``lookahead`` steps.
* ``spatial``: ``predict_concurrent`` of the decode batch on ``sms_decode`` SMs and the prefill
  batch on ``sms_prefill``; decode step j (1..k) ends at ``j * t_d`` and its tokens leave then,
  or once the CPU has launched both phases if that is later (``_delivered``); the iteration
  ends at ``max(k * t_d, t_p)``. With ``free_running=True`` (SGLang PD-multiplexing, whose
  decode stream keeps looping while a prefill runs and sees it done after a step) k is instead
  ``ceil(t_p / t_d)`` and the iteration ends with that step; each of its decode steps is
  CPU-scheduled: it pays a scheduled pass's host time, where duet's look-ahead steps are graph
  replays launched back to back (``LatencyModel.predict_concurrent``).

When the planner predicted a plan with this very LatencyModel and none of its correction factors
has moved from 1 (always so in the simulator, where measured time == raw prediction), its
predicted times *are* the executor's, bit for bit: ``time_plan(..., reuse=True)`` then takes them
from the plan instead of predicting the same batches again (``test_invariants`` checks the
equality).

Decode-only stretches (many identical steps while nothing else happens) are timed with
``decode_steps``: step j's batch has every context grown by j tokens. Roofline time is piecewise
linear in j, so the steps are evaluated at both ends and the middle of a span and interpolated
linearly when the three agree (to 1e-9 relative), else the span is halved.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sglang_duet.latency import Batch, LatencyModel
from sglang_duet.policy import BatchPlan

__all__ = ["Executor", "IterationTiming", "sliced_prefill_s"]


class IterationTiming:
    """Duration of one iteration and the end offsets of its decode steps (seconds)."""

    __slots__ = ("duration_s", "step_offsets", "decode_s", "prefill_s")

    def __init__(self, duration_s: float, step_offsets: list[float], decode_s: float,
                 prefill_s: float) -> None:
        self.duration_s = duration_s
        self.step_offsets = step_offsets
        self.decode_s = decode_s
        self.prefill_s = prefill_s


def sliced_prefill_s(t_p: float, t_d: float, layers: int, tokens: int, budget: int) -> float:
    """A pdmux prefill of ``tokens`` tokens fed ``max(1, budget // tokens)`` of its
    ``layers`` layers per scheduler loop, one loop per decode step of ``t_d`` seconds
    (``multiplexing_mixin.event_loop_pdmux``): n slices of ``t_p / n`` each, slice i
    launched at ``i * t_d``, so it ends at ``max(t_p, (n - 1) * t_d + t_p / n)``."""
    per_loop = max(1, budget // max(tokens, 1))
    n = -(-layers // per_loop)
    return max(t_p, (n - 1) * t_d + t_p / n)


class Executor:
    """``decode_host``: host kind of a spatial decode step (``partition.plan.MenuPlan``);
    ``split_forward_budget``: pdmux's layer slicing (tokens), None for no slicing;
    ``graph_max_bs``: the system's CUDA-graph decode cap (``sim/caps.py``)."""

    def __init__(self, latency: LatencyModel, free_running: bool = False,
                 decode_host: str = "lookahead", split_forward_budget: int | None = None,
                 graph_max_bs: int = 1 << 62) -> None:
        self.latency = latency
        self.free_running = free_running
        self.decode_host = decode_host
        self.split_forward_budget = split_forward_budget
        # a decode-only batch above the system's CUDA-graph cap runs eager (sim/caps.py): it
        # pays the layers' launches instead of one replay
        self.graph_max_bs = graph_max_bs
        self.eager_extra_s = latency.host_seconds(False) - latency.host_seconds(True)

    def time_plan(
        self,
        plan: BatchPlan,
        decode_ctx: Sequence[int],
        prefill_q: Sequence[int],
        prefill_c: Sequence[int],
        prefill_sample: Sequence[bool],
        reuse: bool = False,
    ) -> IterationTiming:
        """Time ``plan``; ``decode_ctx`` are the cached contexts of its decode rows and
        ``prefill_*`` the (q, c, sample) rows of its chunks, in plan order. ``reuse``: take the
        plan's own predictions (see the module docstring)."""
        lat = self.latency
        n_d = len(decode_ctx)
        mode = plan.mode
        if reuse and not self.free_running and plan.predicted_total_s > 0.0:
            k = plan.lookahead if n_d else 0
            if mode == "spatial" and n_d and prefill_q:
                t_d, t_p = plan.predicted_decode_s, plan.predicted_prefill_s
                return IterationTiming(max(k * t_d, t_p),
                                       self._delivered(t_d, k, n_d, prefill_sample), t_d, t_p)
            if mode == "decode_only":
                t = plan.predicted_decode_s + self._eager(n_d)
                return IterationTiming(k * t, [t * j for j in range(1, k + 1)], t, 0.0)
            if mode == "aggregated":
                t = plan.predicted_total_s
                return IterationTiming(t, [t] if n_d else [], t, t)
        if mode == "spatial" and n_d and prefill_q:
            db = Batch(np.ones(n_d, np.int64), np.asarray(decode_ctx, np.int64))
            pb = Batch(prefill_q, prefill_c, prefill_sample)
            bd, bp = lat.predict_concurrent(db, pb, plan.sms_decode, plan.sms_prefill,
                                            self.decode_host)
            t_d, t_p = bd.total_s, bp.total_s
            k = plan.lookahead
            if self.free_running:
                # each pdmux decode step goes through the CPU scheduler (sample, sync, schedule)
                # instead of duet's back-to-back graph replays: it pays the scheduled pass's
                # host time on top of the look-ahead step's (`reference.host_seconds`)
                t_d += (lat.host_seconds(True, "scheduled")
                        - lat.host_seconds(True, self.decode_host))
                if self.split_forward_budget is not None:
                    t_p = sliced_prefill_s(t_p, t_d, lat.model.num_layers, sum(prefill_q),
                                           self.split_forward_budget)
                k = max(1, math.ceil(t_p / t_d - 1e-9)) if t_d > 0 else 1
                return IterationTiming(max(k * t_d, t_p), [t_d * j for j in range(1, k + 1)],
                                       t_d, t_p)
            return IterationTiming(max(k * t_d, t_p),
                                   self._delivered(t_d, k, n_d, prefill_sample), t_d, t_p)
        if mode == "decode_only" or not prefill_q:
            t = lat.predict(Batch(np.ones(n_d, np.int64), np.asarray(decode_ctx, np.int64))).total_s
            t += self._eager(n_d)
            k = plan.lookahead
            return IterationTiming(k * t, [t * j for j in range(1, k + 1)], t, 0.0)
        # aggregated (mixed or prefill-only), or a degenerate spatial plan: one batch, whole GPU
        q = [1] * n_d + list(prefill_q)
        c = list(decode_ctx) + list(prefill_c)
        s = [True] * n_d + list(prefill_sample)
        t = lat.predict(Batch(q, c, s)).total_s
        return IterationTiming(t, [t] if n_d else [], t, t)

    def _delivered(self, t_d: float, k: int, n_d: int, prefill_sample: Sequence[bool]
                   ) -> list[float]:
        """When a duet spatial iteration's decode tokens leave the scheduler (offsets, s): step
        j's at ``j * t_d`` (the runtime processes and streams each step once its mark is done,
        `runtime.lookahead`), but not before the CPU has launched the k steps and the prefill
        (their host time), which it does before it processes any result."""
        lat = self.latency
        launch = (k * lat.host_seconds(True, self.decode_host, n_d)
                  + lat.host_seconds(False, "spatial", sum(map(bool, prefill_sample))))
        return [max(t_d * j, launch) for j in range(1, k + 1)]

    def decode_steps(self, ctx: np.ndarray, m: int, first: float | None = None) -> np.ndarray:
        """Durations of m consecutive decode steps of one batch (contexts grow 1 per step);
        ``first``: the already known duration of step 0."""
        out = np.empty(m, np.float64)
        predict = self.latency.predict
        ones = np.ones(ctx.shape[0], np.int64)
        memo: dict[int, float] = {} if first is None else {0: first}

        def d(j: int) -> float:
            v = memo.get(j)
            if v is None:
                v = memo[j] = predict(Batch(ones, ctx + j)).total_s
            return v

        stack = [(0, m - 1)]
        while stack:
            a, b = stack.pop()
            da, db = d(a), d(b)
            if b - a <= 1:
                out[a] = da
                out[b] = db
                continue
            mid = (a + b) // 2
            dm = d(mid)
            lin = da + (db - da) * (mid - a) / (b - a)
            if abs(dm - lin) <= 1e-9 * max(dm, 1e-12):
                out[a:b + 1] = da + (db - da) * (np.arange(b - a + 1) / (b - a))
            else:
                stack.append((a, mid))
                stack.append((mid, b))
        extra = self._eager(ctx.shape[0])
        return out + extra if extra else out

    def _eager(self, n_decode: int) -> float:
        """Extra seconds of a decode-only pass of `n_decode` requests over the graph cap."""
        return self.eager_extra_s if n_decode > self.graph_max_bs else 0.0
