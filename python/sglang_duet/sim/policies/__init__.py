"""Simulator policy registry: its names are the ``--policy`` choices.

Each entry says how to build one replica's planner, which serving system's memory behaviour the
replica follows (``sglang``: admission reserves KV for expected decode growth, retract the
request with the fewest output tokens; ``vllm``: no reservation, preempt the latest admitted),
whether the decode stream free-runs during a spatial prefill, and the topology (``aggregated``:
``gpus / tp`` identical replicas behind the router; ``1p1d``: one prefill and one decode worker,
KV moved between them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from sglang_duet.latency import LatencyModel
from sglang_duet.policy import BatchPlan, DuetPolicy, ReqState, SmMenu

from .baselines import ChunkedPolicy, PrefillFirstPolicy
from .pdmux import MAX_PREFILL_TOKENS, PdmuxPolicy

__all__ = ["POLICIES", "PlanContext", "Planner", "PolicySpec", "get_policy",
           "policy_names"]


class Planner(Protocol):
    def plan(self, decodes: list[ReqState], waiting: list[ReqState],
             backlog: bool = False) -> BatchPlan: ...

    def observe(self, plan: BatchPlan, measured_s: float, decode_s: float | None = None,
                prefill_s: float | None = None) -> None: ...


@dataclass(frozen=True)
class PlanContext:
    """What a planner factory may use (one per replica)."""

    latency: LatencyModel
    menu: SmMenu
    tbt_slo_s: float
    token_budget: int
    max_lookahead: int
    duet_mode: str


@dataclass(frozen=True)
class PolicySpec:
    name: str
    description: str
    make: Callable[[PlanContext], Planner]
    flavor: Literal["sglang", "vllm"] = "sglang"
    free_running: bool = False
    topology: Literal["aggregated", "1p1d"] = "aggregated"
    token_budget: int | None = None  # the system's own prefill budget, overriding --token-budget


def _duet(ctx: PlanContext) -> Planner:
    return DuetPolicy(ctx.duet_mode, ctx.tbt_slo_s, ctx.token_budget, ctx.max_lookahead,
                      ctx.latency, ctx.menu, correction=True, scheme="gap")


def _duet_paper(ctx: PlanContext) -> Planner:
    return DuetPolicy(ctx.duet_mode, ctx.tbt_slo_s, ctx.token_budget, ctx.max_lookahead,
                      ctx.latency, ctx.menu, correction=True, scheme="paper")


def _chunked(ctx: PlanContext) -> Planner:
    return ChunkedPolicy(ctx.menu.total_sms, ctx.token_budget)


def _prefill_first(ctx: PlanContext) -> Planner:
    return PrefillFirstPolicy(ctx.menu.total_sms, ctx.token_budget)


def _pdmux(ctx: PlanContext) -> Planner:
    return PdmuxPolicy(ctx.menu.total_sms, ctx.latency.hardware.name, ctx.token_budget)


POLICIES: dict[str, PolicySpec] = {
    spec.name: spec
    for spec in (
        PolicySpec("duet", "DuetPolicy: aggregated/spatial switch, spatial gap bounded by tau",
                   _duet),
        PolicySpec("duet-paper", "DuetPolicy, the paper's synchronous spatial scheme "
                   "(t_d <= tau only)", _duet_paper),
        PolicySpec("vllm-chunked", "vLLM chunked prefill, mixed batches", _chunked, "vllm"),
        PolicySpec("sglang-chunked", "SGLang mixed chunked prefill", _chunked),
        PolicySpec("sglang-default", "SGLang default: prefill-only batches first",
                   _prefill_first),
        PolicySpec("sglang-pdmux", "SGLang 0.5.17 PD-multiplexing: green-context groups by "
                   "decode batch, unchunked prefill, free-running decode", _pdmux,
                   free_running=True, token_budget=MAX_PREFILL_TOKENS),
        PolicySpec("dynamo-1p1d", "Dynamo 1P1D: prefill GPU + decode GPU (vLLM), KV transfer",
                   _chunked, "vllm", topology="1p1d"),
    )
}


def policy_names() -> list[str]:
    return list(POLICIES)


def get_policy(name: str) -> PolicySpec:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choices: {', '.join(POLICIES)}") from None
