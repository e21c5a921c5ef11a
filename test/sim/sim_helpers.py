"""Builders shared by the simulator tests."""

from __future__ import annotations

import numpy as np

from sglang_duet.latency import Batch, Calibration, LatencyModel, get_hardware, get_model
from sglang_duet.partition.plan import plan_menu
from sglang_duet.sim import SimConfig, Workload, get_policy, simulate, summarize
from sglang_duet.sim.kvcache import PAGE_SIZE


def make_workload(arrivals, inputs, outputs) -> Workload:
    return Workload(np.asarray(arrivals, float), np.asarray(inputs, np.int64),
                    np.asarray(outputs, np.int64), "test")


def latency(model: str = "qwen3-8b", tp: int = 1) -> LatencyModel:
    """The simulator's default latency model (SimConfig's hardware, calibration, interference)."""
    cfg = SimConfig()
    return LatencyModel(get_hardware(cfg.hardware), get_model(model, tp=tp),
                        Calibration.load(cfg.calibration), cfg.interference)


def pred(q, c, sample=None) -> float:
    return latency().predict(Batch(q, c, sample)).total_s


def mem_fraction_for(tokens: int, model: str = "qwen3-8b", policy: str | None = None,
                     mode: str = "adaptive") -> float:
    """A --mem-fraction leaving room for about ``tokens`` KV tokens (no activation reserve) under
    ``policy`` (duet's partition decode graphs and pdmux's per-group ones take their memory
    too, as in the engine)."""
    spec = get_model(model)
    pages = -(-tokens // PAGE_SIZE)
    need = spec.weight_bytes + pages * PAGE_SIZE * spec.kv_bytes_per_token + 1
    if policy is not None:  # the engine's rule: PolicySpec.extra_graphs
        cfg = SimConfig(duet_mode=mode)
        menu = plan_menu(cfg.partition_backend, cfg.hardware, cfg.decode_graph_sizes)
        need += get_policy(policy).graph_reserve_bytes(cfg, menu)
    return need / get_hardware("h100-sxm").hbm_bytes


def run(workload: Workload, policy: str, **kw):
    cfg = SimConfig(policy=policy, **kw)
    res = simulate(cfg, workload)
    return res, summarize(res, cfg.tbt_slo_ms / 1e3, cfg.ttft_slo_ms / 1e3)
