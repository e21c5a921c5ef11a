"""One simulation per (setting, QPS, run length), cached, and the capacity search over QPS.

A *setting* is one policy with some SimConfig fields overridden (its knobs). ``evaluate`` runs
it at one Poisson QPS for ``requests`` requests and keeps the steady-state statistics
(``sglang_duet.sim.steady``) plus a few whole-run figures. Results are cached on disk under the
output folder's ``tmp/`` (git-ignored), keyed by everything the run depends on including a hash
of the simulator's source, so a rerun after a code change recomputes everything.

``find_capacity`` brackets the highest passing QPS (x1.5 steps up or down from a start) and
bisects it (geometric) until the bracket is within ``rel_tol`` (Sarathi-Serve's capacity search
stops at 2.5%, ``--min-search-granularity``). Pass rules: ``passes`` (the headline: the run
keeps up and >= target of the window's requests meet both SLOs) and ``sarathi_passes``
(Sarathi-Serve's own: median scheduling delay <= 2 s and P99 TBT <= tau).
"""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from sglang_duet.sim import SimConfig, Simulation, build_arrivals, load_trace, summarize
from sglang_duet.sim.steady import steady_state

__all__ = ["LENGTH_TOL", "Cluster", "Point", "Setting", "evaluate", "find_capacity",
           "passes", "run_length", "sarathi_passes"]

LENGTH_TOL = 0.05  # the run-length check: doubling the run may move capacity by this much

_KEEP = ("completed", "throughput_rps", "ttft_p99_ms", "tbt_p50_ms", "tbt_p99_ms", "mode_share",
         "preemptions", "mean_sms_decode", "mean_lookahead", "gap_causes", "kv_peak_use")


@dataclass(frozen=True)
class Cluster:
    """What every run of one sweep shares: trace, model, GPUs, SLOs (ms) and the seed."""

    trace: str
    model: str = "qwen3-8b"
    tp: int = 1
    gpus: int = 2
    hardware: str = "h100-sxm"
    seed: int = 0
    tbt_slo_ms: float = 100.0
    ttft_slo_ms: float = 10000.0
    target: float = 0.9
    base: dict[str, Any] = field(default_factory=dict)  # SimConfig overrides for every run

    def sim_config(self, s: Setting, qps: float, requests: int) -> SimConfig:
        cfg = SimConfig(trace=self.trace, policy=s.policy, model=self.model,
                        hardware=self.hardware, gpus=self.gpus, tp=self.tp, qps=qps,
                        num_requests=requests, seed=self.seed, tbt_slo_ms=self.tbt_slo_ms,
                        ttft_slo_ms=self.ttft_slo_ms)
        return replace(cfg, **{**self.base, **dict(s.knobs)})


@dataclass(frozen=True)
class Setting:
    """A policy and the knobs it runs with, as (SimConfig field, value) pairs."""

    policy: str
    knobs: tuple[tuple[str, Any], ...] = ()

    def with_knob(self, name: str, value: Any) -> Setting:
        rest = tuple((k, v) for k, v in self.knobs if k != name)
        return Setting(self.policy, tuple(sorted(rest + ((name, value),))))

    def with_knobs(self, values: dict[str, Any]) -> Setting:
        """This setting with each of ``values`` set (one value of a `tuning.Knob`)."""
        s = self
        for name, value in values.items():
            s = s.with_knob(name, value)
        return s

    def label(self) -> str:
        return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in self.knobs) or "defaults"


@dataclass(frozen=True)
class Point:
    qps: float
    requests: int
    metrics: dict[str, Any]


def passes(p: Point, target: float = 0.9) -> bool:
    s = p.metrics["steady"]
    return bool(s["keeps_up"] and s["attainment"] >= target)


def sarathi_passes(p: Point, target: float = 0.9) -> bool:
    return bool(p.metrics["steady"]["sarathi_ok"])


# Sub-packages the simulator never imports (test/benchmark/capacity holds this).
SIM_FREE = ("runtime", "server")


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """Hash of the simulator's inputs: the package's sources, calibrations and traces.

    ``runtime/`` and ``server/`` are left out: they import torch or SGLang, which the simulator
    never does (its import closure holds neither), so editing them cannot move a simulated point.
    """
    root = Path(__file__).resolve().parents[2]
    pkg = root / "python" / "sglang_duet"
    h = hashlib.sha256()
    files = sorted(f for f in [*pkg.rglob("*.py"), *pkg.rglob("*.json")]
                   if f.relative_to(pkg).parts[0] not in SIM_FREE)
    files += sorted((root / "benchmark" / "traces").glob("*.*"))
    for f in files:
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=4)
def _trace(name: str):
    return load_trace(name)


class _Cache:
    """Points by key in memory and in one JSON-lines file per source hash (append-only)."""

    def __init__(self) -> None:
        self.dir: str | None = None
        self.points: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def open(self, out_dir: str | None) -> None:
        self.points.clear()
        self.dir = os.path.join(out_dir, "tmp") if out_dir else None
        if not self.dir:
            return
        for path in sorted(glob.glob(os.path.join(self.dir, f"points-{source_hash()}-*.jsonl"))):
            with open(path) as f:
                for line in f:
                    if line.endswith("\n"):  # a line cut short by an interrupted run is skipped
                        rec = json.loads(line)
                        self.points[rec["key"]] = rec["metrics"]

    @property
    def path(self) -> str:
        """This process's file (worker processes append to their own)."""
        return os.path.join(self.dir or "", f"points-{source_hash()}-{os.getpid()}.jsonl")

    def get(self, key: str) -> dict[str, Any] | None:
        return self.points.get(key)

    def put(self, key: str, metrics: dict[str, Any]) -> None:
        self.points[key] = metrics
        if self.dir:
            with self.lock:  # one writer per file: this process's
                os.makedirs(self.dir, exist_ok=True)
                with open(self.path, "a") as f:
                    f.write(json.dumps({"key": key, "metrics": metrics}) + "\n")


CACHE = _Cache()


def _key(cfg: SimConfig) -> str:
    return json.dumps(asdict(cfg), sort_keys=True)


def evaluate(cl: Cluster, s: Setting, qps: float, requests: int) -> Point:
    """One simulation (cached): steady-state window statistics and a few whole-run figures."""
    qps = float(round(qps, 4))
    cfg = cl.sim_config(s, qps, requests)
    key = _key(cfg)
    got = CACHE.get(key)
    if got is None:
        trace = _trace(cl.trace)
        work = build_arrivals(trace, qps, requests, cl.seed)
        res = Simulation(cfg, work, s.policy).run()
        tbt, ttft = cfg.tbt_slo_ms / 1e3, cfg.ttft_slo_ms / 1e3
        m = summarize(res, tbt, ttft)
        got = {k: m.get(k) for k in _KEEP}
        got["steady"] = steady_state(res, tbt, ttft)
        CACHE.put(key, got)
    return Point(qps, requests, got)


Rule = Callable[[Point, float], bool]


def find_capacity(cl: Cluster, s: Setting, requests: int, start: float, rel_tol: float = 0.025,
                  rule: Rule = passes, floor: float = 1 / 64, ceiling: float = 64.0,
                  point: Callable[[float], Point] | None = None) -> tuple[float, list[Point]]:
    """(highest passing QPS within ``rel_tol``, every point run). 0.0 when even
    ``start * floor`` fails; the last QPS tried when ``start * ceiling`` still passes.
    ``point`` runs one load instead of ``evaluate(cl, s, q, requests)`` (the changing-workload
    driver's load scale, `changing.py`)."""
    pts: list[Point] = []

    def ok(q: float) -> bool:
        p = point(q) if point is not None else evaluate(cl, s, q, requests)
        pts.append(p)
        return rule(p, cl.target)

    lo, hi = 0.0, 0.0
    q = start
    if ok(q):
        lo = q
        while True:
            q *= 1.5
            if q > start * ceiling:
                return round(lo, 4), pts
            if not ok(q):
                hi = q
                break
            lo = q
    else:
        hi = q
        while q > start * floor:
            q /= 1.5
            if ok(q):
                lo = q
                break
            hi = q
        if lo == 0.0:
            return 0.0, pts
    while hi / lo > 1.0 + rel_tol:
        mid = (lo * hi) ** 0.5
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return round(lo, 4), pts


def run_length(short_qps: float, long_qps: float, long_requests: int) -> dict[str, Any]:
    """The run-length check's verdict, shared by every benchmark that reports a capacity.

    ``ok``: the capacity with ``long_requests`` (twice the short run's) is within ``LENGTH_TOL``
    of the short run's. ``sets_figure``: it fell by more, so the short run hid a slow drift (a
    running set that grows until the KV pool stops admission) and the longer run's capacity is
    the one to report; a rise leaves the shorter, conservative figure.
    """
    ratio = long_qps / short_qps if short_qps > 0 else 0.0
    return {"requests": long_requests, "capacity_qps": long_qps, "ratio": round(ratio, 4),
            "ok": abs(ratio - 1.0) <= LENGTH_TOL, "sets_figure": ratio < 1.0 - LENGTH_TOL}
