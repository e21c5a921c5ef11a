"""One capacity sweep: every policy at its default and at its best-tuned setting, side by side.

Per policy (the policies run in parallel worker processes, each on the same arrivals):

1. the capacity of its defaults (``search.find_capacity`` at ``FINE_TOL``);
2. coordinate descent over its knobs (``tuning``): a value that fails just above the best
   capacity so far (x (1 + ``COARSE_TOL``)) cannot beat it and is recorded as failing there;
   one that passes gets its capacity searched at ``COARSE_TOL``; the best setting is then
   refined at ``FINE_TOL``;
3. the run-length check: the best setting's capacity with twice the requests; the sweep says
   whether it moved by more than ``LENGTH_TOL`` (5%). When it fell by more, the shorter run
   hid a slow drift (a running set that grows until the KV pool stops admission), so the
   best-tuned capacity *is* the longer run's (``best.capacity_from = "2x run"``, the shorter
   run's figure kept as ``best.short_run_qps``); a rise is left as a flag, the shorter figure
   being the conservative one. The setting a user would pick is the one whose figure holds
   over the longer run, so when the best setting's fell, every other setting tried whose
   shorter-run capacity is above that figure is refined and length-checked too (in order of
   that capacity, or of the QPS its probe failed at, while one can still beat the figure), and
   the highest figure wins (``best.length_checked``: each one checked and its figure). A
   setting whose probe failed (step 2) has its shorter-run capacity searched first: failing
   just above the best shorter run does not say how it fares over the longer one;
4. at the best setting: Sarathi-Serve's capacity (``search.sarathi_passes``) and the saturation
   throughput, the served rate over the steady-state window at twice the capacity;
5. for the SGLang-based systems (``tuning.HRRN_REFERENCE``), the reference row "SGLang after
   0.5.17": the best setting with ``schedule_policy=hrrn`` (SGLang PR #32911, not in the 0.5.17
   the tuned rows run), its capacity found and length-checked by the rule of step 3
   (``reference_hrrn``: setting, label, capacity_qps, run_length). It is not a tuned value;
   `summary.py` counts it as an alternative of its own, ``<policy>+hrrn``.

A committed sweep can be *carried on* (``resume``: ``python -m benchmark.capacity --extend``) when
knobs were added since it ran (issue #48's admission orders): the defaults' capacity is searched
again (a default may have changed: duet's admission order did), and the descent continues from
the committed best setting over the knobs its trials never tried, its trials kept; steps 3
and 4 run again only when a new value wins (else the committed best stands, its run at capacity
re-evaluated so that the newer statistics, e.g. the fairness columns, are there), and step 5
runs where it never did (``extended``: the knobs added and the commit they ran at). A full
sweep and a carried-on one differ only in the order the knobs were tried: the new knob comes
last instead of in its place in `tuning.KNOBS`.

Capacities are Poisson QPS (req/s) on the whole cluster.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from .search import (
    CACHE,
    LENGTH_TOL,
    Cluster,
    Point,
    Setting,
    evaluate,
    find_capacity,
    passes,
    run_length,
    sarathi_passes,
)
from .tuning import HRRN_REFERENCE, knobs_for

# policies whose defaults changed since the committed sweeps: a carried-on sweep searches their
# committed best setting again (its unset knobs now mean something else) and reruns steps 3-4
DEFAULT_CHANGED = frozenset({"duet"})  # --duet-admission: fcfs, then deadline (issue #48)

__all__ = ["AFTER_0_5_17", "COARSE_TOL", "DEFAULT_REQUESTS", "FINE_TOL", "LENGTH_TOL",
           "START_QPS", "SweepConfig", "run_sweep"]

AFTER_0_5_17 = "SGLang after 0.5.17 (schedule_policy=hrrn, sgl-project/sglang PR #32911)"

COARSE_TOL, FINE_TOL = 0.05, 0.025
# requests per run: about 100-4,000 s of arrivals at the policies' capacities on 2 GPUs; the
# run-length check doubles them (within each trace's size). Mooncake's capacity is set by its
# long-prompt tail (TTFT misses), and a uniform sample of 2,000 or 4,000 of its 12,031 requests
# is lighter than the trace (mean prompt 11.5K / 11.6K against 12.0K, P99 75K / 79K against
# 85K): duet's capacity was 1.66 / 1.82 / 1.49 req/s at 2,000 / 4,000 / 8,000 requests, pdmux's
# 1.75 / 1.86 / 1.50. So 6,000 there, checked against 12,000 (the whole trace, reordered).
DEFAULT_REQUESTS: dict[str, int] = {"azure-code": 4000, "azure-conv": 4000, "mooncake": 6000}
START_QPS: dict[str, float] = {"azure-code": 16.0, "azure-conv": 24.0, "mooncake": 1.0}


@dataclass(frozen=True)
class SweepConfig:
    cluster: Cluster
    policies: tuple[str, ...]
    requests: int
    start_qps: float
    tune: bool = True
    quick: bool = False
    length_check: bool = True
    jobs: int = 2

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _summary(s: Setting, cap: float, pts: list[Point]) -> dict[str, Any]:
    at = max((p for p in pts if p.qps == cap), key=lambda p: p.requests, default=None)
    return {"setting": dict(s.knobs), "label": s.label(), "capacity_qps": cap,
            "at_capacity": at.metrics if at else None,
            "points": sorted(({"qps": p.qps, "requests": p.requests,
                               "attainment": p.metrics["steady"]["attainment"],
                               "keeps_up": p.metrics["steady"]["keeps_up"],
                               "served_ratio": p.metrics["steady"]["served_ratio"],
                               "admitted_ratio": p.metrics["steady"]["admitted_ratio"],
                               "ttft_rise_s": p.metrics["steady"]["ttft_rise_s"]}
                              for p in pts), key=lambda d: (d["requests"], d["qps"]))}


def sweep_policy(cfg: SweepConfig, policy: str, resume: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    """Steps 1-5 of the module docstring for one policy; ``resume``: its committed result, to
    carry on over the knobs it never tried (the module docstring)."""
    resume_again = resume is not None and policy in DEFAULT_CHANGED
    cl, n = cfg.cluster, cfg.requests
    t0 = time.perf_counter()
    seen: dict[tuple[Setting, int], dict[float, Point]] = {}

    def search(s: Setting, requests: int, start: float, tol: float, rule=passes) -> float:
        cap, pts = find_capacity(cl, s, requests, start, tol, rule)
        seen.setdefault((s, requests), {}).update({p.qps: p for p in pts})
        return cap

    def summary(s: Setting, cap: float, requests: int = n) -> dict[str, Any]:
        return _summary(s, cap, list(seen.get((s, requests), {}).values()))

    default = Setting(policy)
    knobs = knobs_for(policy, cl.gpus, cl.model, cfg.quick, cl.tp,
                      route="router" not in cl.base, schedule="schedule_policy" not in cl.base)
    if resume is None:
        cap0 = search(default, n, cfg.start_qps, FINE_TOL)
        best, best_cap, trials = default, cap0, []
    else:
        old_best = resume["best"]
        best = Setting(policy, tuple(sorted(old_best["setting"].items())))
        # searched again: a default may have changed since (duet's admission order did)
        cap0 = search(default, n, resume["default"]["capacity_qps"] or cfg.start_qps, FINE_TOL)
        best_cap = old_best.get("short_run_qps", old_best["capacity_qps"])
        if resume_again:  # a default the best leaves unset changed: its figure is stale
            best_cap = search(best, n, best_cap, FINE_TOL)
        if cap0 > best_cap:  # the defaults now beat it (the descent's start)
            best, best_cap = default, cap0
        trials = list(resume["trials"])
        tried = {t["knob"] for t in trials}
        knobs = tuple(k for k in knobs if k.name not in tried)
    first_best = best
    passed: dict[Setting, float] = {best: best_cap}  # shorter-run capacity of every setting
    failed: dict[Setting, float] = {}  # settings whose probe failed: the QPS it failed at
    if cfg.tune:
        for knob in knobs:
            for value in knob.values:
                s = best.with_knobs(value)
                if s == best:
                    trials.append({"knob": knob.name, "value": value, "capacity_qps": best_cap})
                    continue
                if best_cap > 0:  # it must pass just above the best so far to matter
                    probe = evaluate(cl, s, best_cap * (1 + COARSE_TOL), n)
                    seen.setdefault((s, n), {})[probe.qps] = probe
                    if not passes(probe, cl.target):
                        trials.append({"knob": knob.name, "value": value,
                                       "capacity_qps": None, "fails_at_qps": probe.qps})
                        failed[s] = probe.qps
                        continue
                cap = search(s, n, best_cap * (1 + COARSE_TOL) or cfg.start_qps, COARSE_TOL)
                trials.append({"knob": knob.name, "value": value, "capacity_qps": cap})
                passed[s] = cap
                if cap > best_cap:
                    best, best_cap = s, cap
        if best != first_best:
            best_cap = search(best, n, best_cap, FINE_TOL)
            passed[best] = best_cap
    old_setting = resume and resume["best"]["setting"]
    if (resume is not None and not resume_again and best == first_best
            and dict(best.knobs) == old_setting):  # the committed best stands (steps 3-4)
        return {**_carried(cfg, policy, resume, trials, knobs, t0),
                "default": summary(default, cap0)}

    def length_checked(s: Setting, cap: float) -> dict[str, Any]:
        """``summary`` of ``s`` with its run-length check; its figure is ``capacity_qps``."""
        out_s = summary(s, cap)
        cap2 = search(s, 2 * n, cap, FINE_TOL)
        long = summary(s, cap2, 2 * n)
        out_s["run_length"] = {**run_length(cap, cap2, 2 * n), "points": long["points"]}
        if out_s["run_length"]["sets_figure"]:  # the longer run is the steady figure (step 3)
            out_s.update(capacity_qps=cap2, at_capacity=long["at_capacity"],
                         capacity_from="2x run", short_run_qps=cap)
        return out_s

    out: dict[str, Any] = {"default": summary(default, cap0), "best": summary(best, best_cap),
                           "trials": trials}
    if cfg.length_check and best_cap > 0:
        out["best"] = length_checked(best, best_cap)
        if out["best"].get("capacity_from") == "2x run":  # another setting may hold up better
            first = best
            checked = [{"setting": best.label(), "capacity_qps": out["best"]["capacity_qps"]}]
            # a probe-failed setting's shorter-run capacity is below its failing QPS (the
            # order key); searched from there, as the others are refined from theirs
            for s, cap in sorted({**failed, **passed}.items(), key=lambda kv: -kv[1]):
                if s in (first, best) or cap <= out["best"]["capacity_qps"]:
                    continue
                cap = search(s, n, cap, FINE_TOL)  # refined as the best was
                if cap <= out["best"]["capacity_qps"]:
                    continue
                other = length_checked(s, cap)
                checked.append({"setting": s.label(), "capacity_qps": other["capacity_qps"]})
                if other["capacity_qps"] > out["best"]["capacity_qps"]:
                    best, out["best"] = s, other
            out["best"]["length_checked"] = checked
        best_cap = out["best"]["capacity_qps"]
    extra = out["best"]
    if best_cap > 0:
        extra["sarathi_qps"] = search(best, n, best_cap, FINE_TOL, sarathi_passes)
        sat = evaluate(cl, best, 2 * best_cap, n).metrics["steady"]
        extra["saturation_rps"] = sat["served_rps"]
    if cfg.tune and policy in HRRN_REFERENCE and "schedule_policy" not in cl.base:
        ref = best.with_knob("schedule_policy", "hrrn")  # step 5
        cap = search(ref, n, best_cap or cfg.start_qps, FINE_TOL)
        row = length_checked(ref, cap) if cfg.length_check and cap > 0 else summary(ref, cap)
        out["reference_hrrn"] = {"note": AFTER_0_5_17, **row}
    if resume is not None:
        out["extended"] = _extended(knobs)
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def _extended(knobs: tuple) -> dict[str, Any]:
    from benchmark.stamp import stamp

    return {"knobs": [k.name for k in knobs], "commit": stamp()["commit"]}


def _carried(cfg: SweepConfig, policy: str, old: dict[str, Any], trials: list,
             knobs: tuple, t0: float) -> dict[str, Any]:
    """A resumed sweep whose committed best still stands: that result with the new trials, its
    run at capacity re-evaluated (at the run length that set the figure) and step 5 where it
    never ran."""
    cl, n = cfg.cluster, cfg.requests
    out = {**old, "trials": trials, "best": dict(old["best"])}
    best = Setting(policy, tuple(sorted(old["best"]["setting"].items())))
    cap = old["best"]["capacity_qps"]
    if cap > 0:
        length = 2 * n if old["best"].get("capacity_from") == "2x run" else n
        out["best"]["at_capacity"] = evaluate(cl, best, cap, length).metrics
    if (cfg.tune and policy in HRRN_REFERENCE and "reference_hrrn" not in old
            and "schedule_policy" not in cl.base):
        ref = best.with_knob("schedule_policy", "hrrn")
        short = old["best"].get("short_run_qps", cap) or cfg.start_qps
        rcap, pts = find_capacity(cl, ref, n, short, FINE_TOL)
        row = _summary(ref, rcap, pts)
        if cfg.length_check and rcap > 0:
            cap2, pts2 = find_capacity(cl, ref, 2 * n, rcap, FINE_TOL)
            long = _summary(ref, cap2, pts2)
            row["run_length"] = {**run_length(rcap, cap2, 2 * n), "points": long["points"]}
            if row["run_length"]["sets_figure"]:
                row.update(capacity_qps=cap2, at_capacity=long["at_capacity"],
                           capacity_from="2x run", short_run_qps=rcap)
        out["reference_hrrn"] = {"note": AFTER_0_5_17, **row}
    out["extended"] = _extended(knobs)
    out["wall_s"] = round(old.get("wall_s", 0.0) + time.perf_counter() - t0, 1)
    return out


def _task(args: tuple[SweepConfig, str, dict[str, Any] | None]) -> tuple[str, dict[str, Any]]:
    cfg, policy, resume = args
    return policy, sweep_policy(cfg, policy, resume)


def run_sweep(cfg: SweepConfig, out_dir: str | None = None, quiet: bool = False,
              resume: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every policy of ``cfg``; JSON-ready result. ``resume``: a committed result of the same
    cluster, whose policies are carried on (`sweep_policy`)."""
    t0 = time.perf_counter()
    CACHE.open(out_dir)
    old = (resume or {}).get("policies", {})
    tasks = [(cfg, p, old.get(p)) for p in cfg.policies]
    done: dict[str, dict[str, Any]] = {}

    def report(item: tuple[str, dict[str, Any]]) -> None:
        pol, r = item
        done[pol] = r
        if not quiet:
            b = r["best"]
            sys.stderr.write(f"  {pol:<15} default {r['default']['capacity_qps']:<8g} best "
                             f"{b['capacity_qps']:<8g} ({b['label']}) {r['wall_s']} s\n")
            sys.stderr.flush()

    _pool_map(_task, tasks, cfg.jobs, report)
    return {"config": cfg.to_dict(), "policies": {p: done[p] for p in cfg.policies},
            "wall_s": round(time.perf_counter() - t0, 1)}


def _pool_map(fn: Callable, tasks: list, jobs: int, on_done: Callable[[Any], None]) -> None:
    if jobs <= 1 or len(tasks) <= 1:
        for t in tasks:
            on_done(fn(t))
        return
    with mp.get_context("fork").Pool(jobs) as pool:
        for r in pool.imap_unordered(fn, tasks):
            on_done(r)
