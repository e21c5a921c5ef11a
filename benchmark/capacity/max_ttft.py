"""``python -m benchmark.capacity.max_ttft``: what bounds the longest first-token wait.

At its capacity on mooncake, duet's max TTFT is above its aging bound (``aging x`` the TTFT
SLO): a request that has waited that long goes first, but its own prefill, and those of the
requests aged with it, still follow. Is the excess the price of the order, or of the system?
For each named case, duet at its best setting and capacity (the sweep's run length and seed,
`seeds.case_settings`): its P99 / max TTFT and its prefill speed while prompts wait
(`prefill_speed.run_speed`, on the same run). Then the queue-aware bound's ideal server
(`queue_bound`: one queue for all replicas, each prompt's exact prefill seconds, the same
requests and arrivals) at the same load, its replicas prefilling at that speed, admitting in
each order:

* ``fcfs``: arrival order. With one deadline offset for all, arrival order is earliest deadline
  first, which on one server minimises the largest wait (Jackson's rule; preemption cannot
  lower it either). With several replicas it is not always the least, but the reference;
* ``deadline`` and ``sjf``: duet's orders (`policy.admission`), with duet's aging bound.

Each row: the share of the window's first tokens within the SLO (`queue_bound.window_passes`'s
window), P99 and max TTFT (seconds), and whether the rate passes the capacity rule there.

    python -m benchmark.capacity.max_ttft [--cases mooncake-qwen3-8b-tp1 ...] [--requests N]

Writes ``benchmark/results/capacity/max_ttft.{json,md}``. A diagnosis at one seed and one load
per case, not a capacity figure.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np

from benchmark.stamp import write_result
from sglang_duet.policy.admission import Admission, AdmissionConfig
from sglang_duet.sim.steady import window_bounds

from .prefill_speed import run_speed, traced_run
from .queue_bound import (
    FcfsQueue,
    fcfs_first_tokens,
    ordered_first_tokens,
    sjf_first_tokens,
    window_passes,
)
from .search import Cluster, Setting
from .seeds import case_arguments, load_cases
from .sweep import _pool_map

__all__ = ["ORDERS", "ideal_waits", "main"]

ORDERS = ("fcfs", "deadline", "sjf")
DEFAULT_CASES = ["mooncake-qwen3-8b-tp1", "mooncake-qwen3-14b-tp2"]


def waits(arrival: np.ndarray, first: np.ndarray, slo_s: float) -> dict[str, float]:
    """The share within ``slo_s``, P99 and max TTFT (seconds) of the steady-state window's
    requests (``arrival`` sorted; a request with no first token counts as infinitely late)."""
    lo, hi = window_bounds(len(arrival))
    w = first[lo:hi] - arrival[lo:hi]
    return {"attainment": round(float(np.count_nonzero(w <= slo_s + 1e-12) / (hi - lo)), 4),
            "p99_s": round(float(np.quantile(w, 0.99)), 2), "max_s": round(float(w.max()), 2)}


def ideal_waits(queue: FcfsQueue, qps: float, speed: float, order: str, aging: float
                ) -> dict[str, Any]:
    """``queue``'s ideal server at ``qps``, its replicas prefilling at ``speed``, admitting in
    ``order`` (``aging``: duet's bound, in TTFT SLOs): `waits` and the capacity verdict."""
    arrival = queue.unit.arrival_s / qps
    service = queue.service / speed
    if order == "fcfs":
        first = fcfs_first_tokens(arrival, service, queue.replicas)
    elif order == "sjf":
        first = sjf_first_tokens(arrival, service, queue.replicas, aging * queue.ttft)
    else:
        adm = Admission(AdmissionConfig(order, queue.ttft, aging=aging), lambda q, c: 0.0)
        first = ordered_first_tokens(arrival, service, queue.replicas, adm)
    return {**waits(arrival, first, queue.ttft),
            "passes": window_passes(arrival, first, queue.ttft, queue.target)}


def study(case: str, cl: Cluster, requests: int, setting: Setting, qps: float
          ) -> dict[str, Any]:
    """One case: duet's own run, then the ideal server in every order at its load and speed."""
    cfg, res, ideal = traced_run(cl, setting, qps, requests)
    done = sorted(res.requests, key=lambda r: r.arrival_s)
    arrival = np.array([r.arrival_s for r in done])
    first = np.array([r.first_token_s if r.first_token_s >= 0.0 else np.inf for r in done])
    speed = run_speed(res, ideal)["speed"]
    queue = FcfsQueue(cfg, requests, cl.target, ideal)
    return {"case": case, "setting": setting.label(), "qps": cfg.qps, "requests": requests,
            "aging_bound_s": round(cfg.duet_aging * cfg.ttft_slo_ms / 1e3, 2),
            "duet": waits(arrival, first, cfg.ttft_slo_ms / 1e3), "speed": speed,
            "ideal": {o: ideal_waits(queue, cfg.qps, speed, o, cfg.duet_aging) for o in ORDERS}}


def _task(args: tuple) -> dict[str, Any]:
    return study(*args)


def _markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["# What bounds the longest first-token wait", "",
             "Written by `python -m benchmark.capacity.max_ttft` (see its docstring). Duet at its "
             "best setting and capacity; then the ideal server (one queue, exact prefill "
             "seconds, the same requests and arrivals) at the same load, prefilling at duet's "
             "measured speed while prompts wait, in each order. fcfs: arrival order, the "
             "least largest wait on one replica (14B), the reference on two (8B); deadline "
             "and sjf with duet's aging bound. TTFT P99 / max in seconds; "
             "attainment: the share of first tokens within the SLO.", "",
             "| case | load (req/s) | aging bound | duet P99 / max | speed | "
             + " | ".join(f"ideal {o}: attainment, P99 / max, passes" for o in ORDERS) + " |",
             "| --- | ---: | ---: | ---: | ---: | " + " | ".join("---" for _ in ORDERS) + " |"]
    for r in rows:
        cells = [f"{v['attainment']:.1%}, {v['p99_s']:g} / {v['max_s']:g} s, "
                 f"{'yes' if v['passes'] else 'no'}" for v in (r["ideal"][o] for o in ORDERS)]
        lines.append(f"| {r['case']} | {r['qps']:g} | {r['aging_bound_s']:g} s | "
                     f"{r['duet']['p99_s']:g} / {r['duet']['max_s']:g} s | {r['speed']:.3f} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmark.capacity.max_ttft",
                                 description=(__doc__ or "").split("\n")[0])
    case_arguments(ap)
    ap.add_argument("--requests", type=int, default=None,
                    help="requests per run (default: the sweep's run length)")
    ap.add_argument("--dest", default=None, help="where to write (default: the --out folder)")
    args = ap.parse_args(argv)
    cases = load_cases(args.cases or DEFAULT_CASES, args.out)
    if cases is None:
        return 2
    tasks = []
    for case, (cl, n, settings) in cases.items():
        setting, qps = settings["duet"]
        tasks.append((case, cl, args.requests or n, setting, qps))
    rows: list[dict[str, Any]] = []
    _pool_map(_task, tasks, args.jobs, rows.append)
    rows.sort(key=lambda r: r["case"])
    dest = args.dest or args.out
    write_result(os.path.join(dest, "max_ttft.json"),
                 {"benchmark": "capacity.max_ttft", "cases": rows}, argv=argv)
    with open(os.path.join(dest, "max_ttft.md"), "w") as f:
        f.write(_markdown(rows))
    print(_markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
