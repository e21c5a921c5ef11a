"""The front-end cost of each serving system, fitted to the published end-to-end runs, k-fold.

A system's cost is three numbers (`sglang_duet.sim.frontend.FrontEndCost`): ``serial_s``, the
intake server's time per request, which changes what the scheduler sees and so needs a
simulation per value, and ``per_token_s`` and ``latency_s`` (streaming time per token, delivery
latency), which only move the client's times and are applied to a finished simulation. So
every row is simulated once per ``serial_s`` on `SERIAL_GRID`, and each (per-token, latency)
pair of `POST_GRID` is read off those runs.

Loss of a cost on a set of rows: the sum over the rows of that system and
their comparable metrics of ``log(simulated / published)**2``. k-fold: rows are split into k
folds (seeded shuffle); a held-out row is predicted with the cost fitted on the other folds'
rows of its system (the grid point that minimises their loss). The committed cost is the one
fitted on every row.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from sglang_duet.sim import simulate

from .e2e_cases import Case, case_config, case_spec, case_workload, sim_metrics

__all__ = ["POST_GRID", "SERIAL_GRID", "GridRuns", "comparable", "fit_pair", "kfold",
           "log_loss", "write_costs"]

SERIAL_GRID = (0.0, 0.002, 0.004, 0.007, 0.010, 0.014, 0.020)
PER_TOKEN_GRID = (0.0, 0.00005, 0.0001, 0.00015, 0.0002, 0.0003)
LATENCY_GRID = (0.0, 0.005, 0.010, 0.020, 0.040)
POST_GRID = tuple((p, lat) for p in PER_TOKEN_GRID for lat in LATENCY_GRID)
Metrics = dict[str, float | None]


def comparable(c: Case) -> list[str]:
    """The published metrics of `c` the simulator is held to (its ``not_comparable`` left out)."""
    return [m for m in c.published if not any(m.startswith(x) for x in c.not_comparable)]


def log_loss(c: Case, sim: Metrics) -> float:
    total = 0.0
    for m in comparable(c):
        v = sim.get(m)
        total += math.log(v / c.published[m]) ** 2 if v and v > 0 else 25.0
    return total


def write_costs(path: str | Path, costs: dict[str, tuple[float, float, float]],
                extra: dict) -> None:
    body = {**extra, "systems": {s: {"serial_s": a, "per_token_s": p, "latency_s": b}
                                 for s, (a, p, b) in sorted(costs.items())}}
    Path(path).write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


class GridRuns:
    """Every case simulated at every `SERIAL_GRID` value; metrics at every `POST_GRID` pair."""

    def __init__(self, cases: Sequence[Case], switches: dict[str, object] | None = None,
                 serial_grid: Sequence[float] = SERIAL_GRID,
                 post_grid: Sequence[tuple[float, float]] = POST_GRID,
                 log: Callable[[str], None] = print) -> None:
        self.cases = list(cases)
        self.serial_grid = tuple(serial_grid)
        self.post_grid = tuple(post_grid)
        # (case id, serial index, post index) -> metrics
        self.metrics: dict[tuple[str, int, int], Metrics] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for i, serial in enumerate(self.serial_grid):
                path = Path(tmp) / f"fe{i}.json"
                write_costs(path, {"sglang": (serial, 0.0, 0.0), "vllm": (serial, 0.0, 0.0)}, {})
                for c in self.cases:
                    cfg = case_config(c, **{**(switches or {}), "frontend_costs": str(path)})
                    res = simulate(cfg, case_workload(c, cfg.seed), case_spec(c))
                    fe = res.frontend
                    for j, (per_token, lat) in enumerate(self.post_grid):
                        if fe is not None:
                            fe.cost = replace(fe.cost, per_token_s=per_token, latency_s=lat)
                        self.metrics[c.id, i, j] = sim_metrics(res)
                log(f"  front-end grid: serial {serial * 1e3:g} ms done")

    def loss(self, rows: Sequence[Case], i: int, j: int) -> float:
        return sum(log_loss(c, self.metrics[c.id, i, j]) for c in rows)


def fit_pair(runs: GridRuns, rows: Sequence[Case]) -> tuple[int, int]:
    """Grid indices (serial, post) of least loss on `rows` (ties: the smaller costs)."""
    best = min(((runs.loss(rows, i, j), i, j) for i in range(len(runs.serial_grid))
                for j in range(len(runs.post_grid))), key=lambda t: (round(t[0], 12), t[1],
                                                                      t[2]))
    return best[1], best[2]


def kfold(runs: GridRuns, k: int, seed: int = 0
          ) -> tuple[dict[str, Metrics], dict[str, tuple[float, float, float]]]:
    """(held-out metrics per case id, the cost fitted on all rows per system)."""
    cases = runs.cases
    systems = sorted({c.flavor for c in cases})
    k = max(2, min(k, len(cases)))
    folds = np.array_split(np.random.default_rng(seed).permutation(len(cases)), k)
    held: dict[str, Metrics] = {}
    for fold in folds:
        out = {int(x) for x in fold}
        for system in systems:
            train = [c for n, c in enumerate(cases) if n not in out and c.flavor == system]
            i, j = fit_pair(runs, train) if train else (0, 0)
            for n in out:
                if cases[n].flavor == system:
                    held[cases[n].id] = runs.metrics[cases[n].id, i, j]
    full = {}
    for system in systems:
        i, j = fit_pair(runs, [c for c in cases if c.flavor == system])
        full[system] = (runs.serial_grid[i], *runs.post_grid[j])
    return held, full
