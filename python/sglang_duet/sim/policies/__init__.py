"""Simulator policy registry: its names are the ``--policy`` choices.

Each entry says how to build one replica's planner, which serving system's memory behaviour the
replica follows (``sglang``: admission reserves KV for expected decode growth, retract the
request with the fewest output tokens; ``vllm``: no reservation, preempt the latest admitted),
whether the decode stream free-runs during a spatial prefill, and the topology (``aggregated``:
``gpus / tp`` identical replicas behind the router; ``disagg``: ``disagg_prefill`` prefill and
``disagg_decode`` decode workers, KV moved between them). Every knob a system's users turn is
a SimConfig field (``token_budget``, ``pdmux_*``, ``disagg_*``, ``kv_xfer_*``, duet's
``partition_backend`` / ``decode_graph_sizes`` / ``max_lookahead``), defaulting to the
system's own default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from sglang_duet.args import target_tbt_s
from sglang_duet.latency import LatencyModel
from sglang_duet.partition.plan import MenuPlan, graph_memory_bytes
from sglang_duet.policy import BatchPlan, DuetPolicy, ReqState

from ..caps import sglang_graph_max_bs
from ..config import AUTO_ROUTER, SimConfig
from .baselines import ChunkedPolicy, PrefillFirstPolicy
from .pdmux import SM_GROUP_NUM, PdmuxPolicy

__all__ = ["POLICIES", "PlanContext", "Planner", "PolicySpec", "check_config", "get_policy",
           "policy_names"]


class Planner(Protocol):
    def plan(self, decodes: list[ReqState], waiting: list[ReqState],
             backlog: bool = False, kv_held: bool = False,
             kv_use: float = 0.0) -> BatchPlan: ...

    def observe(self, plan: BatchPlan, measured_s: float, decode_s: float | None = None,
                prefill_s: float | None = None) -> None: ...


@dataclass(frozen=True)
class PlanContext:
    """What a planner factory may use (one per replica): the latency model, duet's menu (the
    runtime's, `partition.plan.plan_menu`), the TBT SLO (s), the replica's token budget and the
    whole configuration (each system's own knobs)."""

    latency: LatencyModel
    menu: MenuPlan
    tbt_slo_s: float
    token_budget: int
    cfg: SimConfig


def _no_graphs(cfg: SimConfig, menu: MenuPlan) -> int:
    """SGLang's usual one decode capture, which the activation reserve covers."""
    return 0


@dataclass(frozen=True)
class PolicySpec:
    """``budget``: the system's own prefill budget field of SimConfig (tokens), default
    ``token_budget``; ``partitions``: it runs on duet's partition menu; ``split_forward``:
    pdmux's layer slicing applies; ``extra_graphs(cfg, menu)``: decode CUDA-graph captures the
    system makes beyond SGLang's usual one, whose memory the engine keeps out of the KV pool
    (the same estimate per capture for every system, `partition.plan.graph_memory_bytes`);
    ``router``: what its users get across replicas without choosing (``SimConfig.router``
    ``auto``): SGLang's ``--load-balance-method auto`` is round-robin outside PD
    (`ServerArgs._handle_load_balance_method`), ``vllm serve --data-parallel-size`` with a dense
    model alternates too (its balancer gets no counts from independent dense ranks:
    `router.rules.VllmDpRouter`), Dynamo's front end routes round-robin by default, and
    sglang-duet's ``--duet-router`` defaults to its latency-model router."""

    name: str
    description: str
    make: Callable[[PlanContext], Planner]
    flavor: Literal["sglang", "vllm"] = "sglang"
    free_running: bool = False
    topology: Literal["aggregated", "disagg"] = "aggregated"
    budget: str = "token_budget"
    partitions: bool = False
    split_forward: bool = False
    extra_graphs: Callable[[SimConfig, MenuPlan], int] = _no_graphs
    router: str = "round-robin"

    def router_for(self, cfg: SimConfig) -> str:
        """The router ``cfg`` runs this system behind: ``cfg.router``, or its own default."""
        return self.router if cfg.router == AUTO_ROUTER else cfg.router

    def token_budget(self, cfg: SimConfig) -> int:
        return int(getattr(cfg, self.budget))

    def split_forward_budget(self, cfg: SimConfig) -> int | None:
        return cfg.pdmux_split_forward_budget if self.split_forward else None

    def graph_reserve_bytes(self, cfg: SimConfig, menu: MenuPlan) -> int:
        """Bytes of the KV pool the system's extra decode-graph captures take."""
        graphs = self.extra_graphs(cfg, menu)
        return graph_memory_bytes(graphs, cfg.graph_max_bs or sglang_graph_max_bs(cfg.tp)
                                  ) if graphs else 0


def _duet_with(scheme: str) -> Callable[[PlanContext], Planner]:
    def make(ctx: PlanContext) -> Planner:
        cfg = ctx.cfg
        tau = target_tbt_s(cfg.tbt_slo_ms, cfg.duet_tbt_headroom_ms)  # as the runtime plans
        return DuetPolicy(cfg.duet_mode, tau, ctx.token_budget, cfg.max_lookahead,
                          ctx.latency, ctx.menu.sm_menu, correction=True, scheme=scheme,
                          decode_host=ctx.menu.decode_host, sized=cfg.duet_sized,
                          objective=cfg.duet_objective,
                          backlog_share=cfg.duet_backlog_share)
    return make


def _chunked(ctx: PlanContext) -> Planner:
    return ChunkedPolicy(ctx.latency.hardware.num_sms, ctx.token_budget)


def _prefill_first(ctx: PlanContext) -> Planner:
    return PrefillFirstPolicy(ctx.latency.hardware.num_sms, ctx.token_budget)


def _partition_graphs(cfg: SimConfig, menu: MenuPlan) -> int:
    """Duet's decode captures, one per partition size with graphs (none when aggregated), as
    the runtime makes them (`runtime.decode_graphs.capture`) and reserves for them
    (`reserve_for_partitions`)."""
    return len(menu.graph_sizes) if cfg.duet_mode != "aggregated" else 0


def _pdmux_graphs(cfg: SimConfig, menu: MenuPlan) -> int:
    """pdmux captures its decode graphs once per stream group instead of once (SGLang's
    ``DecodeCudaGraphRunner`` capture loop over ``get_stream_groups()``, each group with a decode
    attention backend of its own from ``decode_attn_backend_group``,
    ``attention_backend_setup.py``): ``sm_group_num - 1`` captures more, the same kind of
    capture as each of duet's partition graphs."""
    return SM_GROUP_NUM - 1


def _pdmux(ctx: PlanContext) -> Planner:
    hw = ctx.latency.hardware
    return PdmuxPolicy(hw.num_sms, hw.name, ctx.token_budget, ctx.cfg.pdmux_decode_bs_divisor)


POLICIES: dict[str, PolicySpec] = {
    spec.name: spec
    for spec in (
        PolicySpec("duet", "DuetPolicy: aggregated/spatial switch, spatial gap bounded by tau",
                   _duet_with("gap"), partitions=True, extra_graphs=_partition_graphs,
                   router="duet"),
        PolicySpec("duet-paper", "DuetPolicy, the paper's synchronous spatial scheme "
                   "(t_d <= tau only)", _duet_with("paper"), partitions=True,
                   extra_graphs=_partition_graphs, router="duet"),
        PolicySpec("vllm-chunked", "vLLM chunked prefill, mixed batches", _chunked, "vllm"),
        PolicySpec("sglang-chunked", "SGLang mixed chunked prefill", _chunked),
        PolicySpec("sglang-default", "SGLang default: prefill-only batches first",
                   _prefill_first),
        PolicySpec("sglang-pdmux", "SGLang 0.5.17 PD-multiplexing: green-context groups by "
                   "decode batch, unchunked prefill, free-running decode", _pdmux,
                   free_running=True, budget="pdmux_max_prefill_tokens", split_forward=True,
                   extra_graphs=_pdmux_graphs),
        PolicySpec("dynamo", "Dynamo xPyD (vLLM workers): prefill GPUs + decode GPUs, KV "
                   "transfer", _chunked, "vllm", topology="disagg"),
    )
}


def check_config(cfg: SimConfig, policy: str | None = None) -> None:
    """ValueError (one line) when ``cfg`` cannot run ``policy`` (default ``cfg.policy``): what
    ``SimConfig.validate`` cannot know without the policy's topology."""
    spec = get_policy(policy or cfg.policy)
    workers = cfg.disagg_prefill + cfg.disagg_decode
    if spec.topology == "disagg" and cfg.gpus % workers:
        raise ValueError(f"{spec.name} {cfg.disagg_prefill}P{cfg.disagg_decode}D needs a "
                         f"multiple of {workers} GPUs, got {cfg.gpus}")


def policy_names() -> list[str]:
    return list(POLICIES)


def get_policy(name: str) -> PolicySpec:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choices: {', '.join(POLICIES)}") from None
