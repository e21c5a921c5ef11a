"""The router base: per-replica views fed by load reports, updated on every dispatch.

Between two reports a router cannot see the work it has just sent. Like SGLang's DP controller
(`DataParallelController.refresh_load_budget` and `DPBudget.dispatch` in
`sglang/srt/managers/data_parallel_controller.py`) every router here (1) applies fresh reports at
most once per `refresh_s` (SGLang: 20 ms), so a burst is spread with the router's own counters
instead of being reset to a stale report on every request, and (2) adds each request it sends to
the chosen replica's counters until the next report replaces them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from .load import Decision, NoReplicaError, ReplicaLoad

if TYPE_CHECKING:
    from sglang_duet.policy.admission import Admission

__all__ = ["REFRESH_S", "Router", "RouterContext", "View"]

logger = logging.getLogger(__name__)

REFRESH_S = 0.02  # SGLang's refresh_load_budget throttle (seconds)


@dataclass(frozen=True)
class RouterContext:
    """What a router may need besides load reports.

    latency: a `sglang_duet.latency.LatencyModel` of one replica (duet router only).
    tbt_slo_s: the replicas' time-between-tokens SLO tau (seconds).
    token_budget: prompt tokens per iteration (SGLang's chunked-prefill size).
    refresh_s: shortest interval between two applied rounds of reports (seconds).
    admission: the replicas' admission order, a `sglang_duet.policy.admission.Admission`
        (``--duet-admission``; duet router only): which queued prompts a new one would wait
        for. None: arrival order.
    """

    latency: object | None = None
    tbt_slo_s: float = 0.1
    token_budget: int = 8192
    refresh_s: float = REFRESH_S
    admission: Admission | None = None


class View:
    """A router's running estimate of one replica: the last report plus what was sent since."""

    __slots__ = ("idx", "alive", "reported", "running", "waiting", "context_tokens",
                 "queued_tokens", "total_tokens", "capacity_tokens", "stamp", "dispatched",
                 "version")

    def __init__(self, idx: int) -> None:
        self.idx = idx
        self.alive = True
        self.reported = False
        self.running = self.waiting = 0
        self.context_tokens = self.queued_tokens = self.total_tokens = self.capacity_tokens = 0
        self.stamp = -1.0
        self.dispatched = 0  # requests sent here, ever
        self.version = 0  # bumped when a report changes the decode state

    def apply(self, load: ReplicaLoad) -> None:
        if (load.running, load.context_tokens) != (self.running, self.context_tokens):
            self.version += 1
        self.reported = True
        self.running, self.waiting = load.running, load.waiting
        self.context_tokens, self.queued_tokens = load.context_tokens, load.queued_tokens
        self.total_tokens, self.capacity_tokens = load.total_tokens, load.capacity_tokens
        self.stamp = load.timestamp

    def account(self, prompt_tokens: int) -> None:
        """A request was sent here: it waits, with all its prompt tokens to prefill."""
        self.waiting += 1
        self.queued_tokens += prompt_tokens
        self.total_tokens += prompt_tokens
        self.dispatched += 1


class Router:
    """Base of every router; subclasses implement `_choose`. Not thread-safe."""

    name: ClassVar[str] = ""
    uses_load: ClassVar[bool] = True  # False: reports are ignored (round-robin)
    # the system's own report interval (seconds), where it is fixed; None: the context's
    refresh_s: ClassVar[float | None] = None

    def __init__(self, num_replicas: int, ctx: RouterContext | None = None) -> None:
        if num_replicas < 1:
            raise ValueError("a router needs at least one replica")
        self.ctx = ctx or RouterContext()
        self._refresh_s = self.ctx.refresh_s if self.refresh_s is None else self.refresh_s
        self.views = [View(i) for i in range(num_replicas)]
        self._last_refresh = -float("inf")

    # --- feedback -------------------------------------------------------------------------------
    def due(self, now: float) -> bool:
        """Whether reports offered at `now` (seconds) would be applied."""
        return self.uses_load and now - self._last_refresh >= self._refresh_s

    def observe(self, loads: Iterable[ReplicaLoad], now: float) -> bool:
        """Apply fresh reports if `due(now)`; returns whether they were applied."""
        if not self.due(now):
            return False
        self._last_refresh = now
        for load in loads:
            v = self.views[load.replica]
            if load.timestamp != v.stamp:
                v.apply(load)
        return True

    def set_alive(self, replica: int, alive: bool, why: str = "") -> None:
        v = self.views[replica]
        if v.alive != alive:
            logger.warning("router %s: replica %d %s%s", self.name, replica,
                           "back" if alive else "unavailable, routing around it",
                           f" ({why})" if why else "")
        v.alive = alive

    # --- dispatch -------------------------------------------------------------------------------
    def pick(self, prompt_tokens: int) -> Decision:
        """Choose a live replica for a request of `prompt_tokens` and count it there."""
        alive = [v for v in self.views if v.alive]
        if not alive:
            raise NoReplicaError("no live replica to route to")
        decision = self._choose(prompt_tokens, alive)
        self.views[decision.replica].account(prompt_tokens)
        return decision

    def _choose(self, prompt_tokens: int, alive: Sequence[View]) -> Decision:
        raise NotImplementedError

    # --- reporting ------------------------------------------------------------------------------
    def dispatch_counts(self) -> list[int]:
        return [v.dispatched for v in self.views]

    def predicted_loads(self) -> list[float | None]:
        """Per replica, predicted seconds of queued work (None without a latency model)."""
        return [None] * len(self.views)
