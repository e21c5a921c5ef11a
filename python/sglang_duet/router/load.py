"""What a router knows about a replica, and what it answers.

`ReplicaLoad` carries the fields of SGLang's own per-replica load report (`LoadSnapshot` in
`sglang/srt/managers/load_snapshot.py`, built by `SchedulerLoadInquirer.get_loads` in
`scheduler_components/load_inquirer.py`), which every scheduler already publishes to shared
memory for SGLang's DP controller. The server copies a snapshot into one of these; the simulator
builds one from its replica's queues. Tokens are counts, times are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Decision", "NoReplicaError", "ReplicaLoad"]


class NoReplicaError(RuntimeError):
    """Every replica is marked dead: the request cannot be placed."""


@dataclass(frozen=True)
class ReplicaLoad:
    """One replica's load report.

    running: requests in the running (decoding) batch (`num_running_reqs`).
    waiting: requests queued for prefill (`num_waiting_reqs`).
    context_tokens: KV tokens in use, i.e. the running requests' contexts (`num_used_tokens`).
    queued_tokens: prompt tokens not yet in the KV cache, queued or in a chunked prefill
        (`num_waiting_uncached_tokens`).
    total_tokens: KV in use plus the queued requests' full lengths (`num_total_tokens`), the
        quantity SGLang's `total_tokens` method balances.
    capacity_tokens: KV pool size in tokens (`max_total_num_tokens`); 0 when unknown.
    timestamp: when the replica wrote the report (its own clock, seconds); a report whose
        timestamp equals the last one applied is stale and skipped, as SGLang's
        `DPBudget.update_budget` does.
    """

    replica: int
    running: int = 0
    waiting: int = 0
    context_tokens: int = 0
    queued_tokens: int = 0
    total_tokens: int = 0
    capacity_tokens: int = 0
    timestamp: float = 0.0


@dataclass(frozen=True)
class Decision:
    """Where one request goes and why. `load_s` is the chosen replica's predicted seconds of
    queued work including this request (duet router), or None for routers without a model."""

    replica: int
    reason: str
    load_s: float | None = None
