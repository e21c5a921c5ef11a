"""SLO attainment against QPS per policy, and the capacity found by bisection.

Capacity of a policy = the highest Poisson QPS at which at least ``target`` (0.9) of all requests
meet both SLOs (their own P99 TBT <= tau and TTFT <= the TTFT SLO), the simulator's
``slo_both_attainment``. The sweep evaluates every policy at every grid point; with ``p`` the
largest grid point such that it and every grid point below it pass, and ``f`` the next one, the
capacity is bisected in ``(p, f)`` for ``bisect_steps`` steps (``p = 0`` when the first point
already fails; no bisection when every point passes: the capacity is then reported as at least
the last point, ``above_grid``). Points are independent simulations: they run in a process pool.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sglang_duet.sim import SimConfig, Simulation, build_arrivals, load_trace, summarize

__all__ = ["CapacityConfig", "DEFAULT_GRIDS", "DEFAULT_REQUESTS", "Point", "run_sweep"]

# QPS grids per trace (req/s on the 2-GPU cluster): spans light load to well past every
# policy's knee, denser where the policies' capacities fall.
DEFAULT_GRIDS: dict[str, tuple[float, ...]] = {
    "azure-code": (4, 8, 12, 16, 24, 32, 40, 48, 64),
    "azure-conv": (8, 16, 24, 32, 40, 48, 60, 72, 90),
    "mooncake": (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0),
}
DEFAULT_REQUESTS: dict[str, int] = {"azure-code": 2000, "azure-conv": 3000, "mooncake": 1000}
_KEEP = ("slo_both_attainment", "slo_attainment", "throughput_rps", "goodput_rps", "ttft_p99_ms",
         "tbt_p50_ms", "tbt_p99_ms", "tbt_max_ms", "mode_share", "preemptions", "completed",
         "rejected", "mean_sms_decode", "mean_lookahead", "gap_causes", "sim_wall_s")


@dataclass(frozen=True)
class CapacityConfig:
    """One capacity sweep: a trace, a cluster, the policies and the search (QPS in req/s)."""

    trace: str
    policies: tuple[str, ...]
    grid: tuple[float, ...]
    model: str = "qwen3-8b"
    tp: int = 1
    gpus: int = 2
    hardware: str = "h100-sxm"
    requests: int = 1000
    seed: int = 0
    tbt_slo_ms: float = 100.0
    ttft_slo_ms: float = 10000.0
    target: float = 0.9
    bisect_steps: int = 4
    jobs: int = 2
    sim_overrides: dict[str, Any] = field(default_factory=dict)

    def sim_config(self, policy: str, qps: float) -> SimConfig:
        base = SimConfig(trace=self.trace, policy=policy, model=self.model, hardware=self.hardware,
                         gpus=self.gpus, tp=self.tp, qps=qps, num_requests=self.requests,
                         seed=self.seed, tbt_slo_ms=self.tbt_slo_ms, ttft_slo_ms=self.ttft_slo_ms)
        return replace(base, **self.sim_overrides)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Point:
    policy: str
    qps: float
    metrics: dict[str, Any]

    @property
    def attainment(self) -> float:
        return float(self.metrics["slo_both_attainment"] or 0.0)


@functools.lru_cache(maxsize=4)
def _trace(name: str):
    return load_trace(name)


def evaluate(cfg: CapacityConfig, policy: str, qps: float) -> Point:
    """One simulation of ``policy`` at ``qps`` (runs in a worker process)."""
    sc = cfg.sim_config(policy, qps)
    n = min(cfg.requests, len(_trace(cfg.trace)))
    work = build_arrivals(_trace(cfg.trace), qps, n, cfg.seed)
    res = Simulation(sc, work, policy).run()
    m = summarize(res, sc.tbt_slo_ms / 1e3, sc.ttft_slo_ms / 1e3)
    return Point(policy, float(qps), {k: m.get(k) for k in _KEEP})


def _eval_task(args: tuple[CapacityConfig, str, float]) -> Point:
    return evaluate(*args)


def _bisect_task(args: tuple[CapacityConfig, str, float, float]) -> list[Point]:
    cfg, policy, lo, hi = args
    out = []
    for _ in range(cfg.bisect_steps):
        mid = round((lo + hi) / 2, 4)
        p = evaluate(cfg, policy, mid)
        out.append(p)
        if p.attainment >= cfg.target:
            lo = mid
        else:
            hi = mid
    return out


def capacity_of(points: Sequence[Point], grid: Sequence[float], target: float
                ) -> tuple[float, float | None, bool]:
    """(capacity lower bound, first failing QPS above it or None, above_grid) from the points of
    one policy: the largest passing QPS below the first failure of the grid prefix rule."""
    by_q = {p.qps: p.attainment for p in points}
    lo, hi = 0.0, None
    for q in sorted(grid):
        if by_q[q] >= target:
            lo = q
        else:
            hi = q
            break
    for q in sorted(by_q):  # bisection points inside (lo, hi)
        if q > lo and (hi is None or q < hi):
            if by_q[q] >= target:
                lo = q
            else:
                hi = q
    return lo, hi, hi is None


def _pool_map(fn: Callable, tasks: list, jobs: int, on_done: Callable[[Any], None]) -> list:
    if jobs <= 1 or len(tasks) <= 1:
        out = []
        for t in tasks:
            r = fn(t)
            on_done(r)
            out.append(r)
        return out
    ctx = mp.get_context("fork")
    with ctx.Pool(jobs) as pool:
        out = []
        for r in pool.imap_unordered(fn, tasks):
            on_done(r)
            out.append(r)
        return out


class _Progress:
    def __init__(self, total: int, quiet: bool) -> None:
        self.total, self.done, self.quiet, self.t0 = total, 0, quiet, time.perf_counter()

    def __call__(self, result: Point | list[Point]) -> None:
        pts = result if isinstance(result, list) else [result]
        self.done += 1
        if self.quiet:
            return
        p = pts[-1]
        el = time.perf_counter() - self.t0
        sys.stderr.write(f"[{self.done:>3}/{self.total}] {el:6.1f}s {p.policy:<15} qps {p.qps:<7g}"
                         f" attainment {p.attainment:.3f}"
                         f"{' (bisection)' if isinstance(result, list) else ''}\n")
        sys.stderr.flush()


def run_sweep(cfg: CapacityConfig, quiet: bool = False) -> dict[str, Any]:
    """Grid then bisection for every policy; JSON-ready result (see the module docstring)."""
    t0 = time.perf_counter()
    tasks = [(cfg, pol, float(q)) for pol in cfg.policies for q in cfg.grid]
    prog = _Progress(len(tasks) + len(cfg.policies), quiet)
    points: list[Point] = _pool_map(_eval_task, tasks, cfg.jobs, prog)
    per: dict[str, list[Point]] = {pol: [] for pol in cfg.policies}
    for p in points:
        per[p.policy].append(p)
    btasks = []
    for pol in cfg.policies:
        lo, hi, above = capacity_of(per[pol], cfg.grid, cfg.target)
        if not above and cfg.bisect_steps > 0:
            btasks.append((cfg, pol, lo, hi))
    prog.total = len(tasks) + len(btasks)
    for pts in _pool_map(_bisect_task, btasks, cfg.jobs, prog):
        per[pts[0].policy].extend(pts)
    out: dict[str, Any] = {}
    for pol in cfg.policies:
        pts = sorted(per[pol], key=lambda p: p.qps)
        lo, hi, above = capacity_of(pts, cfg.grid, cfg.target)
        at = next((p for p in pts if p.qps == lo), None)
        out[pol] = {
            "capacity_qps": lo,
            "first_fail_qps": hi,
            "above_grid": above,
            "at_capacity": at.metrics if at is not None else None,
            "points": [{"qps": p.qps, **p.metrics} for p in pts],
        }
    return {"config": cfg.to_dict(), "policies": out,
            "wall_s": round(time.perf_counter() - t0, 1)}
