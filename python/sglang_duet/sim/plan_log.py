"""The simulator's plan log: the runtime's `--duet-plan-log` records for a simulated run.

`PlanLog` wraps one replica's planner: it passes every call through, remembers what each executed
plan was given, and after the run writes one JSON line per iteration with the runtime's own
serialiser (`policy.plan.plan_log_line`), so `python -m sglang_duet.plan_view` and the plan-log
readers take either. The simulated duration stands in for the measured time and simulated
seconds for the clock. A *decode stretch* (decode-only steps with no new work,
`replica.Replica._start_stretch`) is planned and observed once, so it is one line whose time is
its first step's.
"""

from __future__ import annotations

import json
from typing import Any

from sglang_duet.policy.plan import BatchPlan, plan_log_line

from .replica import Replica

__all__ = ["PlanLog"]


class PlanLog:
    def __init__(self, replica: Replica) -> None:
        self.inner = replica.planner
        self.replica = replica
        self.executed: list[tuple[BatchPlan, float, int]] = []  # plan, seconds, waiting
        self._waiting = 0
        replica.planner = self  # type: ignore[assignment]

    def plan(self, decodes: list, waiting: list, *args: Any, **kwargs: Any) -> BatchPlan:
        self._waiting = len(self.replica.queue) + len(waiting)  # queued + admitted, unfinished
        return self.inner.plan(decodes, waiting, *args, **kwargs)

    def observe(self, plan: BatchPlan, measured_s: float, decode_s: float | None = None,
                prefill_s: float | None = None) -> None:
        self.inner.observe(plan, measured_s, decode_s, prefill_s)
        self.executed.append((plan, measured_s, self._waiting))

    def __getattr__(self, name: str) -> Any:  # the planner's other attributes (correction, ...)
        return getattr(self.inner, name)

    def lines(self) -> list[dict]:
        """One record per executed iteration; the replica logs each one's start
        (`iter_start`) in the order the planner observed them."""
        starts = self.replica.iter_start
        return [plan_log_line(plan, s, plan.lookahead if plan.mode == "spatial" else 0, "",
                              end_s=starts[i] + s, waiting=w)
                for i, (plan, s, w) in enumerate(self.executed)]

    def write(self, path: str) -> None:
        with open(path, "w") as f:
            for line in self.lines():
                f.write(json.dumps(line, sort_keys=True) + "\n")
