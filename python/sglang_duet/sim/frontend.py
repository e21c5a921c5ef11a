"""Per-request front-end time: the HTTP server and tokenizer process in front of each scheduler.

Both systems put one Python process between the client and the scheduler, and it handles every
request on the way in and every streamed token on the way out: SGLang's `TokenizerManager`
(HTTP, chat template, tokenization, output streaming; ``--tokenizer-worker-num`` defaults to 1,
`server_args.py`) and vLLM's API server (``--api-server-count`` 1: the same work in front of the
engine-core process). The model, per replica (each replica is one server):

* **intake** is one FIFO server: request r holds it ``serial_s`` seconds (HTTP parse, chat
  template, tokenize, hand-off) and reaches the scheduler's waiting queue when that ends;
* **delivery**: the same process streams every sampled token back, ``per_token_s`` each
  (detokenize, SSE), one after another in the time intake leaves it (intake first: a loop busy
  with a backlog of arrivals streams nothing), and the client sees it ``latency_s`` later. So a
  burst of short prompts gets its first tokens only after the intake backlog, and a burst of
  many streams is capped at ``1 / per_token_s`` tokens per second at the client however fast
  the GPU is. The scheduler does not wait for it: it only shifts the client's times.

**Workers.** Both systems can run several front-end processes per server: SGLang's
``--tokenizer-worker-num N`` (HTTP workers, each with its own `TokenizerManager`) beside
``--detokenizer-worker-num N``, vLLM's ``--api-server-count N`` (each API server tokenizes,
detokenizes and streams its own requests). With ``workers`` = N each replica has N such
servers: the k-th request routed to a replica enters through its server k mod N (the kernel
spreads connections over the workers' shared socket; an even spread is what it aims at) and all
its tokens stream back through that server. One server's costs are the fitted ones; N of them
scale intake and delivery N-fold, which assumes the detokenizer is scaled with the tokenizer
workers (both flags set to N) and the HTTP layer is not shared.

Costs are per serving system (`Flavor.name`) and come from ``frontend_costs.json``, which
``benchmark.latency_model.e2e_report`` fits to the published end-to-end runs (held-out k-fold
errors and the rows used are in that file and the report). Intake is not delayed by streaming
work (the scheduler sees requests at their intake-only times).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["COSTS_PATH", "FrontEnd", "FrontEndCost", "frontend_cost"]

COSTS_PATH = Path(__file__).resolve().parent / "frontend_costs.json"


@dataclass(frozen=True)
class FrontEndCost:
    """Seconds the front end spends: `serial_s` of the intake server per request, `per_token_s`
    of the same process per streamed token (detokenize, SSE), and `latency_s` added to every
    token's delivery (network, client)."""

    serial_s: float = 0.0
    per_token_s: float = 0.0
    latency_s: float = 0.0

    def __post_init__(self) -> None:
        if not (self.serial_s >= 0.0 and self.per_token_s >= 0.0 and self.latency_s >= 0.0):
            raise ValueError(f"front-end costs must be >= 0, got {self}")


def frontend_cost(flavor: str, path: str | Path = COSTS_PATH) -> FrontEndCost:
    """The committed cost of a serving system ('sglang' or 'vllm')."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    try:
        entry = data["systems"][flavor]
    except KeyError:
        raise ValueError(f"no front-end cost for {flavor!r} in {path}") from None
    return FrontEndCost(float(entry["serial_s"]), float(entry.get("per_token_s", 0.0)),
                        float(entry["latency_s"]))


class FrontEnd:
    """The front ends of `n` replicas, `workers` servers each (server ``rep * workers + w``):
    intake queues and the record that delivery needs."""

    def __init__(self, cost: FrontEndCost, n: int, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"front-end workers must be >= 1, got {workers}")
        self.cost = cost
        self.workers = workers
        self._taken = [0] * n  # requests each replica's front end has taken in
        self._free = [0.0] * (n * workers)  # when each intake server is next idle
        # per replica, when its requests still in intake reach the scheduler, in arrival order:
        # with k mod N assignment and one serial time, request k is ready at
        # max(arrival_k, ready_{k-N}) + serial, which never decreases in k, so FIFO is exact
        self._pending: list[deque[float]] = [deque() for _ in range(n)]
        self._ends: list[list[float]] = [[] for _ in range(n * workers)]

    def next_server(self, rep: int) -> int:
        """The server the next request routed to `rep` will enter through."""
        return rep * self.workers + self._taken[rep] % self.workers

    def intake(self, rep: int, now: float) -> float:
        """A request reaches replica `rep`'s front end at `now` (through `next_server(rep)`):
        when it reaches the scheduler."""
        srv = self.next_server(rep)
        self._taken[rep] += 1
        ready = max(now, self._free[srv]) + self.cost.serial_s
        self._free[srv] = ready
        self._ends[srv].append(ready)
        self._pending[rep].append(ready)
        return ready

    def ready_times(self, arrivals: list[float]) -> list[float]:
        """When requests arriving at `arrivals` (sorted, one idle replica) reach the scheduler:
        what `intake` will return for them, in arrival order, known in advance (round-robin
        routing)."""
        out, serial = [], self.cost.serial_s
        free = [0.0] * self.workers
        for j, a in enumerate(arrivals):
            w = j % self.workers
            free[w] = (a if a > free[w] else free[w]) + serial
            out.append(free[w])
        return out

    def handed_over(self, rep: int) -> None:
        """The oldest pending request of `rep` has reached its scheduler."""
        self._pending[rep].popleft()

    def next_ready(self, rep: int) -> float:
        """When the next request still in `rep`'s intake reaches the scheduler (inf: none)."""
        pending = self._pending[rep]
        return pending[0] if pending else float("inf")

    def busy_periods(self, srv: int) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of intake server `srv`'s busy periods (merged, in order)."""
        ends = np.asarray(self._ends[srv], np.float64)
        if not ends.size:
            return ends, ends
        starts = ends - self.cost.serial_s
        new = np.ones(ends.size, bool)
        new[1:] = starts[1:] > ends[:-1]  # FIFO: a period ends where the server idles
        first = np.flatnonzero(new)
        last = np.append(first[1:] - 1, ends.size - 1)
        return starts[first], ends[last]

    def deliver(self, srv: int, t: np.ndarray) -> np.ndarray:
        """Client-side times of tokens sampled at `t` (any order) by requests that entered
        through server `srv`: served one after another, `per_token_s` each, in the time its
        intake leaves idle (intake first), then `latency_s` later."""
        t = np.asarray(t, np.float64)
        if not t.size:
            return t.copy()
        bs, be = self.busy_periods(srv)
        if not bs.size and self.cost.per_token_s == 0.0:
            return t + self.cost.latency_s
        cum = np.concatenate(([0.0], np.cumsum(be - bs)))  # busy time before period m
        order = np.argsort(t, kind="stable")
        ts = t[order]
        # idle time elapsed by ts: ts minus the busy time before it
        m = np.searchsorted(bs, ts, side="right") - 1
        busy = np.where(m >= 0, cum[np.maximum(m, 0)] + np.minimum(ts, be[np.maximum(m, 0)])
                        - bs[np.maximum(m, 0)], 0.0)
        u = ts - busy
        c = self.cost.per_token_s
        k = np.arange(ts.size, dtype=np.float64)
        w = np.maximum.accumulate(u - c * k) + c * (k + 1.0) if c else u
        # back from the idle axis: add the busy periods that start at or before idle w
        idle_start = bs - cum[:-1]
        n = np.searchsorted(idle_start, w, side="right")
        out = np.empty_like(ts)
        out[order] = w + cum[n] + self.cost.latency_s
        return out
