"""Router capacity in the simulator, by the same steady-state rule as ``benchmark.capacity``.

Per router: the highest Poisson QPS at which the run keeps up (admitted >= 0.97x offered over the
steady-state window, TTFT not rising) and >= 90% of the window's requests meet both SLOs
(``benchmark.capacity.search.passes``; the replicas run the duet policy). Every router sees the
same sampled requests and arrival gaps (one seed), scaled to each QPS. Next to the routers, each
setup gets the alternatives a user of that cluster could run instead, each at its best-tuned
setting (``benchmark.capacity.sweep.sweep_policy``): SGLang mixed chunked prefill behind
round-robin (its chunk size tuned) and Dynamo (its KV link and its xPyD split tuned).

Requests per run scale with the replicas (``PER_REPLICA``), so every run lasts about as long as
a 2-GPU one. The duet router's capacity is also searched at twice the run length
(``benchmark.capacity.search.run_length``, the same verdict as the capacity sweep's): where the
longer run's capacity is more than 5% lower, it is the figure reported. Only duet's router gets
the check, so it can only lower duet's own figure.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmark.capacity.search import Cluster, Setting, find_capacity, run_length
from benchmark.capacity.sweep import FINE_TOL, START_QPS, SweepConfig, sweep_policy

__all__ = ["BASELINES", "PER_REPLICA", "SETUPS", "Setup", "router_capacity"]

PER_REPLICA = {"azure-code": 2000, "azure-conv": 2000, "mooncake": 1000}
BASELINES = ("sglang-chunked", "dynamo")
TOL = 0.05


@dataclass(frozen=True)
class Setup:
    """One cluster: a model on `gpus` GPUs of `hardware`, `tp` GPUs per replica."""

    name: str
    model: str
    gpus: int
    tp: int
    hardware: str = "h100-sxm"

    @property
    def replicas(self) -> int:
        return self.gpus // self.tp


SETUPS = (
    Setup("qwen3-8b-8xh100-tp1", "qwen3-8b", 8, 1),
    Setup("qwen3-14b-8xh100-tp2", "qwen3-14b", 8, 2),
    Setup("qwen3-8b-4xh100-tp1", "qwen3-8b", 4, 1),
    Setup("qwen3-14b-4xh100-tp2", "qwen3-14b", 4, 2),
)


def _cluster(setup: Setup, trace: str, seed: int, **base) -> Cluster:
    return Cluster(trace, setup.model, setup.tp, setup.gpus, setup.hardware, seed, base=base)


def start_qps(setup: Setup, trace: str) -> float:
    """A first probe near the capacity: the 2-GPU TP1 start, per replica, times the replicas."""
    return START_QPS.get(trace, 4.0) / 2 * setup.replicas


def router_capacity(setup: Setup, trace: str, router: str, seed: int = 0,
                    length_check: bool = False) -> dict:
    """The duet policy behind ``router``: its capacity and every run's window statistics."""
    n = PER_REPLICA.get(trace, 1000) * setup.replicas
    cl = _cluster(setup, trace, seed, router=router)
    cap, pts = find_capacity(cl, Setting("duet"), n, start_qps(setup, trace), TOL)
    keys = ("attainment", "keeps_up", "served_ratio", "admitted_ratio")
    out = {"capacity_qps": cap, "requests": n,
           "probes": [{"qps": p.qps, **{k: p.metrics["steady"][k] for k in keys}}
                      for p in sorted(pts, key=lambda p: p.qps)]}
    if length_check and cap > 0:
        cap2, _ = find_capacity(cl, Setting("duet"), 2 * n, cap, FINE_TOL)
        out["run_length"] = run_length(cap, cap2, 2 * n)
        if out["run_length"]["sets_figure"]:  # as benchmark.capacity.sweep, step 3
            out.update(capacity_qps=cap2, capacity_from="2x run", short_run_qps=cap)
    return out


def baseline_capacity(setup: Setup, trace: str, policy: str, seed: int = 0) -> dict:
    """``policy`` on the whole cluster at its best-tuned setting (round-robin across replicas,
    pinned: the tuning leaves a router the cluster sets alone)."""
    n = PER_REPLICA.get(trace, 1000) * setup.replicas
    cfg = SweepConfig(_cluster(setup, trace, seed, router="round-robin"), (policy,), n,
                      start_qps(setup, trace),
                      length_check=False, jobs=1)
    r = sweep_policy(cfg, policy)
    return {"capacity_qps": r["best"]["capacity_qps"], "setting": r["best"]["label"],
            "default_qps": r["default"]["capacity_qps"], "requests": n, "trials": r["trials"]}
