"""``python -m benchmark.capacity.prefill_speed``: how fast each system prefills while prompts wait.

At capacity every system here is TTFT- or throughput-bound, so what decides it is how much of
the device's prefill speed survives the decodes beside it. For each named case, duet and the
best-tuned alternative each run at their best setting (read from the committed sweep JSON) at
their own capacity at the sweep's run length and seed (`seeds.case_settings`), with every
replica's iterations recorded (`sim.replica.Replica.trace`). Over the steady-state window
(`sim.steady.window_bounds`), in the iterations that start while a prompt waits or prefills on
that replica:

* ``speed``: the ideal prefill seconds of the chunks they ran over their wall seconds. Ideal: what
  the queue-aware bound charges a prompt (`queue_bound.FcfsQueue`): each new token at the
  physical bound's big-batch per-token time, plus the chunks' own attention, on the whole GPU.
  1.0 is the bound's prefill-only speed; decodes beside the prefill, host time, small chunks and
  interference lower it. Also per iteration kind (share of that time, speed).
* ``held_share``: the share of that time in iterations that began with the KV pool holding a
  waiting prompt back (admission stopped at a page shortfall).
* ``fcfs_qps``: the highest rate at which the ideal FCFS server of the queue-aware bound (one
  queue for all replicas, no KV limit, the same sample and arrivals, the capacity rule) passes
  when its replicas prefill at exactly that speed. Where it is near the policy's capacity, the
  prefill speed under load explains the figure and routing and queue order cost little; where it
  is far above, something else binds (the front end, TBT, the KV pool). It errs high as the
  queue-aware bound does: its prefix cache is one LRU as large as every pool, filled on arrival,
  so its prompts carry no more new tokens than the run's did.

    python -m benchmark.capacity.prefill_speed [--cases mooncake-qwen3-8b-tp1 ...]

Writes ``benchmark/results/capacity/prefill_speed.{json,md}``. A diagnosis at one seed and one
load per policy, not a capacity figure.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from benchmark.stamp import write_result
from sglang_duet.sim import build_arrivals, load_trace
from sglang_duet.sim.engine import Simulation
from sglang_duet.sim.replica import ITER_KINDS
from sglang_duet.sim.steady import window_bounds

from .bound import _Ideal
from .queue_bound import FcfsQueue
from .search import Cluster, Setting
from .seeds import case_arguments, load_cases
from .sweep import _pool_map

__all__ = ["main", "measure", "run_speed", "speed_of", "traced_run"]


def speed_of(trace: list[tuple], t0: float, t1: float, ideal_s) -> dict[str, Any]:
    """``speed``, ``held_share`` and the split by iteration kind over one replica's (or several
    replicas') recorded iterations that start in [t0, t1] while prompts wait, whole;
    ``pending_s``: their seconds within [t0, t1]; ``ideal_s(chunks)``: the ideal prefill seconds
    of one iteration's [(tokens, cached)] chunks."""
    wall, ideal, held, inside = {}, {}, 0.0, 0.0
    for start, end, kind, _, chunks, pending, kv_held in trace:
        if pending and t0 <= start <= t1:
            name = ITER_KINDS[kind]
            wall[name] = wall.get(name, 0.0) + (end - start)
            ideal[name] = ideal.get(name, 0.0) + (ideal_s(chunks) if chunks else 0.0)
            held += (end - start) if kv_held else 0.0
            inside += min(end, t1) - start  # the part within the window (pending_s)
    total = sum(wall.values())
    if total <= 0.0:
        return {"speed": None, "pending_s": 0.0, "held_share": None, "kinds": {}}
    return {"speed": round(sum(ideal.values()) / total, 4), "pending_s": round(inside, 3),
            "held_share": round(held / total, 4),
            "kinds": {k: {"time_share": round(w / total, 4),
                          "speed": round(ideal[k] / w, 4) if w > 0.0 else None}
                      for k, w in sorted(wall.items())}}


def traced_run(cl: Cluster, s: Setting, qps: float, requests: int) -> tuple[Any, Any, _Ideal]:
    """(config, result, the bound's ideal for the config) of one run at ``qps`` with every
    replica's iterations recorded (`Replica.trace`), for `run_speed`."""
    cfg = cl.sim_config(s, round(qps, 4), requests)
    sim = Simulation(cfg, build_arrivals(load_trace(cl.trace), cfg.qps, requests, cl.seed),
                     s.policy)
    for rep in sim.replicas:
        rep.trace = []
    return cfg, sim.run(), _Ideal(cfg)


def run_speed(res: Any, ideal: _Ideal) -> dict[str, Any]:
    """`speed_of` a traced run's steady-state window, all replicas, and ``pending_share``."""
    arrivals = sorted(r.arrival_s for r in res.requests)
    lo, hi = window_bounds(len(arrivals))
    trace = [it for rep in res.replicas for it in rep.trace or ()]
    got = speed_of(trace, arrivals[lo], arrivals[hi - 1],
                   lambda chunks: ideal.rows_s([n for n, _ in chunks], [c for _, c in chunks]))
    span = (arrivals[hi - 1] - arrivals[lo]) * len(res.replicas)
    got["pending_share"] = round(got["pending_s"] / span, 4) if span > 0 else None
    return got


def measure(cl: Cluster, s: Setting, qps: float, requests: int) -> dict[str, Any]:
    """One run at ``qps`` with its iterations recorded: the prefill speed while prompts wait,
    and the ideal FCFS server's capacity at that speed (the module docstring)."""
    cfg, res, ideal = traced_run(cl, s, qps, requests)
    got = run_speed(res, ideal)
    speed = got["speed"]
    fcfs = FcfsQueue(cfg, requests, cl.target, ideal)
    got["fcfs_qps"] = round(fcfs.highest(lambda _: speed), 4) if speed else None
    return {"qps": cfg.qps, **got}


def _task(args: tuple[str, str, Cluster, Setting, float, int]) -> tuple[str, str, dict]:
    case, pol, cl, s, qps, n = args
    return case, pol, measure(cl, s, qps, n)


def _markdown(out: dict[str, Any]) -> str:
    lines = ["# Prefill speed while prompts wait", "",
             "Written by `python -m benchmark.capacity.prefill_speed` (see its docstring). Each "
             "policy at its best setting and its own capacity at the sweep's run length and seed "
             "(where a 2x run set the figure, the shorter run's, as in `misses.md`). Speed: the "
             "ideal prefill seconds of the chunks run over the wall seconds of the iterations "
             "that ran while prompts waited (1.0: the physical bound's prefill-only speed); pool "
             "held: the share of that time the KV pool held a waiting prompt back; FCFS at that "
             "speed: the ideal first-come-first-served server's capacity with its replicas "
             "prefilling at exactly that speed.", "",
             "| case | policy | capacity | time with prompts waiting | speed | by kind: share of "
             "that time, speed | pool held | FCFS at that speed | capacity / it |",
             "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for case, pols in out.items():
        for pol, row in pols.items():
            kinds = "; ".join(f"{k} {v['time_share']:.2f}, "
                              f"{'-' if v['speed'] is None else format(v['speed'], '.2f')}"
                              for k, v in row["kinds"].items())
            fq = row["fcfs_qps"]
            share = "-" if row["pending_share"] is None else f"{row['pending_share']:.0%}"
            speed = "-" if row["speed"] is None else f"{row['speed']:.3f}"
            ratio = f"{row['qps'] / fq:.0%}" if fq else "-"
            held = "-" if row["held_share"] is None else f"{row['held_share']:.1%}"
            lines.append(f"| {case} | {pol} ({row['setting']}) | {row['qps']:g} | {share} | "
                         f"{speed} | {kinds} | {held} | {'-' if fq is None else format(fq, 'g')} "
                         f"| {ratio} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmark.capacity.prefill_speed",
                                 description=(__doc__ or "").split("\n")[0])
    case_arguments(ap)
    args = ap.parse_args(argv)
    sweeps = load_cases(args.cases, args.out)
    if sweeps is None:
        return 2
    t0 = time.perf_counter()
    tasks, out = [], {}
    for case, (cl, n, pols) in sweeps.items():
        out[case] = {}
        for p, (s, cap) in pols.items():
            out[case][p] = {"setting": s.label(), "requests": n}
            tasks.append((case, p, cl, s, cap, n))

    def done(item: tuple[str, str, dict]) -> None:
        case, pol, got = item
        out[case][pol].update(got)
        print(f"  {case:<28} {pol:<14} speed {got['speed']} fcfs {got['fcfs_qps']}",
              file=sys.stderr)

    _pool_map(_task, tasks, args.jobs, done)
    payload = {"benchmark": "capacity.prefill_speed", "cases": out,
               "wall_s": round(time.perf_counter() - t0, 1)}
    write_result(os.path.join(args.out, "prefill_speed.json"), payload)
    with open(os.path.join(args.out, "prefill_speed.md"), "w") as f:
        f.write(_markdown(out))
    print(_markdown(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
