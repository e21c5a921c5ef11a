"""Routers without a latency model: round-robin, least queued tokens, SGLang's two load-aware
methods, written after SGLang 0.5.17's own rules
(`sglang/srt/managers/data_parallel_controller.py`), and vLLM's data-parallel balancer as it
runs for a mixture-of-experts model."""

from __future__ import annotations

from collections.abc import Sequence

from .base import Router, View
from .load import Decision

__all__ = ["LeastTokensRouter", "RoundRobinRouter", "TotalRequestsRouter", "TotalTokensRouter",
           "VllmDpRouter"]


class RoundRobinRouter(Router):
    """`DataParallelController.round_robin_scheduler`: a counter over the live replicas."""

    name = "round-robin"
    uses_load = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._next = 0

    def _choose(self, prompt_tokens: int, alive: Sequence[View]) -> Decision:
        v = alive[self._next % len(alive)]
        self._next = (self._next + 1) % len(alive)
        return Decision(v.idx, "round-robin")


class LeastTokensRouter(Router):
    """Fewest prompt tokens queued for prefill (the duet router's fallback); ties: fewer
    requests, then lowest index (without the request tie-break, idle replicas with empty queues
    would all send to replica 0)."""

    name = "least-tokens"

    def _choose(self, prompt_tokens: int, alive: Sequence[View]) -> Decision:
        v = min(alive, key=lambda v: (v.queued_tokens, v.running + v.waiting, v.idx))
        return Decision(v.idx, f"least queued tokens ({v.queued_tokens})")


class TotalRequestsRouter(Router):
    """`DPBudget.dispatch(TOTAL_REQUESTS)`: fewest running + waiting requests (lowest index on a
    tie); the choice then counts one more request until the next report."""

    name = "total-requests"

    def _choose(self, prompt_tokens: int, alive: Sequence[View]) -> Decision:
        v = min(alive, key=lambda v: (v.running + v.waiting, v.idx))
        return Decision(v.idx, f"fewest requests ({v.running + v.waiting})")


class TotalTokensRouter(Router):
    """`DPBudget.dispatch(TOTAL_TOKENS)`: fewest KV-in-use plus queued tokens
    (`num_total_tokens`), ties by total requests, then lowest index; the choice then counts the
    request's prompt length (`len(req.input_ids)`) until the next report."""

    name = "total-tokens"

    def _choose(self, prompt_tokens: int, alive: Sequence[View]) -> Decision:
        v = min(alive, key=lambda v: (v.total_tokens, v.running + v.waiting, v.idx))
        return Decision(v.idx, f"fewest total tokens ({v.total_tokens})")


class VllmDpRouter(Router):
    """vLLM V1's internal data-parallel balancer (`DPLBAsyncMPClient.get_core_engine_for_request`
    in `vllm/v1/engine/core_client.py`): the lowest ``4 x waiting + running`` (waiting weighs
    four times, as it delays TTFT), ties to the lowest index (one API server starts its scan at
    engine 0); the choice counts one more waiting request until the next report. Reports come
    from `DPCoordinator` at most every 100 ms (its ``stats_update_interval_ms`` default). That is
    ``vllm serve --data-parallel-size N`` without an external balancer for a mixture-of-experts
    model only: the counts are published by `DPEngineCoreProc._maybe_publish_request_counts`,
    and `run_engine_core` runs a dense model's DP ranks as independent `EngineCoreProc`s ("Non-
    MoE DP ranks are completely independent"), which publish none, so the balancer sees only
    its own increments and alternates: round-robin, what the simulated vLLM gets for the dense
    models here (`PolicySpec.router`). vLLM counts a
    request part-way through a chunked prefill as running; the load report here
    (`ReplicaLoad`, SGLang's fields) counts it in neither, one request at most per replica."""

    name = "vllm-dp"
    refresh_s = 0.1

    def _choose(self, prompt_tokens: int, alive: Sequence[View]) -> Decision:
        v = min(alive, key=lambda v: (4 * v.waiting + v.running, v.idx))
        return Decision(v.idx, f"lowest 4 x waiting + running ({4 * v.waiting + v.running})")
