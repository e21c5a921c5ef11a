"""The end-to-end costs a simulation run switches on (`SimConfig` fields ``frontend``,
``prefix_cache``, ``running_caps`` with ``max_running`` / ``graph_max_bs``, ``sglang_schedule``),
built once per run from the serving system the policy imitates. Each cost lives in its own module
(`frontend`, `prefix_cache`, `caps`, `kvcache.Flavor`); this one only assembles them."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_duet.latency import HardwareSpec

from .caps import system_caps
from .config import SimConfig
from .frontend import COSTS_PATH, FrontEnd, frontend_cost
from .kvcache import Flavor, KvSizing
from .prefix_cache import PrefixCache

__all__ = ["RunCosts"]

NO_CAP = 1 << 62


@dataclass(frozen=True)
class RunCosts:
    flavor: Flavor
    max_running: int
    graph_max_bs: int
    prefix: bool
    frontend_on: bool
    frontend_costs: str | None = None
    frontend_workers: int = 1

    @classmethod
    def build(cls, cfg: SimConfig, flavor_name: str, hw: HardwareSpec, model_name: str,
              tp: int, sizing: KvSizing, token_budget: int, has_hashes: bool) -> RunCosts:
        max_running = graph = NO_CAP
        if cfg.running_caps:
            caps = system_caps(flavor_name, hw, model_name, tp, sizing.capacity_tokens,
                               token_budget)
            max_running = cfg.max_running or caps.max_running
            graph = cfg.graph_max_bs or caps.graph_max_bs
        return cls(Flavor.of(flavor_name, cfg.sglang_schedule), max_running, graph,
                   cfg.prefix_cache and has_hashes, cfg.frontend, cfg.frontend_costs,
                   cfg.frontend_workers)

    def replica_kwargs(self) -> dict[str, object]:
        """Per-replica state: a fresh prefix cache each."""
        return {"max_running": self.max_running,
                "prefix": PrefixCache() if self.prefix else None}

    def frontend(self, n_entry: int) -> FrontEnd | None:
        if not self.frontend_on:
            return None
        cost = frontend_cost(self.flavor.name, self.frontend_costs or COSTS_PATH)
        return FrontEnd(cost, n_entry, self.frontend_workers)
