"""Capacity on a workload whose mix shifts, with each system's settings picked once (issue #50).

    python -m benchmark.capacity.changing                        # both workloads, every system
    python -m benchmark.capacity.changing --workload prefill-decode-switch --systems duet,dynamo
    python -m benchmark.capacity.changing --report-only          # tables and plot from the JSON

The workloads are the committed phased ones (``sglang_duet.sim.phases``,
``phased_workloads.json``); the capacity is the highest *load scale* (a multiplier of the whole
profile's rate) at which a run passes ``changing_rule.judge`` (keeps up under the steady-state
rule's admissions, >= 90% of the window's and of every phase's requests meet both SLOs), found by
``search.find_capacity``'s bracketing and bisection. Qwen3-8B, TP=1, 2 GPUs (two replicas),
H100, the ``published-h100`` calibration, seed 0: simulated, like every capacity figure.

Per system, as a user would run it (``tuned once``): its settings are fixed for the whole run,
found by the single-trace sweeps' own search run over the whole workload. The starting points
are its defaults and its best-tuned settings of the three single-trace sweeps
(``benchmark/results/capacity/<trace>-qwen3-8b-tp1.json``, ``policies.<name>.best.setting``):
the defaults' capacity at ``COARSE_TOL``, each other candidate probed just above the best so far
(x (1 + ``COARSE_TOL``)) and searched only where the probe passes. From the best of them,
``sweep.py``'s coordinate descent over every knob ``tuning.knobs_for`` names for two replicas
(the server's own knobs, SGLang's ``--schedule-policy``, duet's admission order, the router),
each value probed the same way; the winner is refined at ``FINE_TOL`` (duet's defaults too).
Then the run-length check (``length_check_of``): the profile played twice must
not move the figure by more than 5%, settled by two probes where they can; a fall of more than
5% has the longer run's capacity searched and sets the figure (``search.run_length``), as in
``sweep.py``.

The upper reference (``oracle``): each phase run with the better (more requests within both
SLOs) of two settings, the per-trace best setting of the trace carrying most of its load and the
tuned-once setting, as if the system were re-tuned at every phase boundary; or, where that
serves less, never switching (the tuned-once capacity: `oracle_of`). The
simulator cannot change a setting mid-run, so each phase's requests are simulated on their own
(an empty cluster at the phase's start: no queue, no running batch and no prefix cache carried
over from the phase before) and their outcomes judged together by the same rule. Starting
every phase empty favours the oracle at a switch (the previous phase's backlog is gone); it is
an upper reference, not a system.

Results: ``benchmark/results/capacity/changing/<workload>.json`` (stamped), ``README.md`` (the
tables) and ``<workload>.png`` (attainment against time at each system's capacity), by
``changing_report``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, replace
from functools import lru_cache
from typing import Any

import numpy as np

from benchmark.stamp import ROOT, write_result
from sglang_duet.sim import Simulation
from sglang_duet.sim.phases import Phased, PhasedSpec, build_phased, load_specs, spec

from .changing_rule import judge, outcomes, timeline
from .search import (
    CACHE,
    LENGTH_TOL,
    Cluster,
    Point,
    Setting,
    find_capacity,
    run_length,
    source_hash,
)
from .sweep import COARSE_TOL, FINE_TOL
from .tuning import knobs_for

__all__ = ["SYSTEMS", "candidates", "capacity", "oracle_settings", "run_point", "sweep_system"]

SYSTEMS = ("duet", "sglang-pdmux", "sglang-chunked", "dynamo", "vllm-chunked")  # run order
MODEL, TP, GPUS = "qwen3-8b", 1, 2
RESULTS = os.path.join(ROOT, "benchmark", "results", "capacity")
OUT = os.path.join(RESULTS, "changing")
BIN_S = 10.0  # the timeline's bin (s)
START = 1.0  # first load scale tried


def per_trace_best(policy: str, results: str = RESULTS) -> dict[str, Setting]:
    """The best-tuned setting of ``policy`` in each committed single-trace sweep."""
    out = {}
    for trace in ("azure-code", "azure-conv", "mooncake"):
        path = os.path.join(results, f"{trace}-{MODEL}-tp{TP}.json")
        with open(path) as f:
            best = json.load(f)["policies"][policy]["best"]["setting"]
        out[trace] = Setting(policy, tuple(sorted(best.items())))
    return out


def candidates(policy: str, best: dict[str, Setting]) -> list[Setting]:
    """The defaults, then each distinct per-trace best setting (in trace order)."""
    out = [Setting(policy)]
    for s in best.values():
        if s not in out:
            out.append(s)
    return out


def oracle_settings(sp: PhasedSpec, best: dict[str, Setting], also: Setting | None = None
                    ) -> tuple[tuple[Setting, ...], ...]:
    """Per phase, the settings the oracle may switch to: the per-trace best setting of the trace
    carrying most of its load, and ``also`` (the tuned-once setting: a phase may be served
    better by it than by any single trace's best)."""
    return tuple(tuple(dict.fromkeys((best[p.dominant()],) + ((also,) if also else ())))
                 for p in sp.phases)


@lru_cache(maxsize=8)
def _built(sp: PhasedSpec, scale: float, seed: int) -> Phased:
    return build_phased(sp, scale, seed)


def _outcomes(cl: Cluster, sp: PhasedSpec, s: Setting, scale: float, part: int | None
              ) -> dict[str, list]:
    """One simulation's per-request outcomes (cached): the whole workload, or phase ``part``."""
    cfg = replace(cl.sim_config(s, 1.0, 1), qps=None, num_requests=None)
    key = json.dumps({"cfg": asdict(cfg), "workload": sp.to_dict(), "scale": scale,
                      "part": part}, sort_keys=True)
    got = CACHE.get(key)
    if got is None:
        ph = _built(sp, scale, cl.seed)
        work = ph.workload if part is None else ph.part(part)
        res = Simulation(cfg, work, s.policy).run()
        got = outcomes(res, cfg.tbt_slo_ms / 1e3, cfg.ttft_slo_ms / 1e3)
        CACHE.put(key, got)
    return got


Oracle = tuple[tuple[Setting, ...], ...]  # per phase, the settings it may switch to


def run_point(cl: Cluster, sp: PhasedSpec, system: Setting | Oracle, scale: float) -> Point:
    """One load scale of ``system``, judged: a setting, or the oracle (per phase, its
    settings' run of that phase alone that meets both SLOs for the most requests)."""
    scale = float(round(scale, 4))
    ph = _built(sp, scale, cl.seed)
    n = len(ph.workload)
    ttft, met = np.full(n, -1.0), np.zeros(n, bool)
    chosen = []
    if isinstance(system, Setting):
        o = _outcomes(cl, sp, system, scale, None)
        ttft[:], met[:] = o["ttft"], o["met"]
    else:
        for p, alternatives in enumerate(system):
            sel = np.flatnonzero(ph.phase == p)
            if not sel.size:
                chosen.append(None)
                continue
            runs = [_outcomes(cl, sp, s, scale, p) for s in alternatives]
            k = max(range(len(runs)), key=lambda i: (int(np.sum(runs[i]["met"])), -i))
            ttft[sel], met[sel] = runs[k]["ttft"], runs[k]["met"]
            chosen.append(alternatives[k].label())
    arrival = ph.workload.arrival_s
    verdict = judge(arrival, ttft, met, ph.phase, len(sp.phases), cl.ttft_slo_ms / 1e3,
                    cl.target)
    if chosen:
        verdict["oracle_choice"] = chosen
    verdict["timeline"] = timeline(arrival, met, BIN_S, sp.duration_s)
    verdict["offered_rps"] = round(n / sp.duration_s, 3)
    return Point(scale, n, {"steady": verdict})


def _passes(p: Point, target: float = 0.9) -> bool:
    return bool(p.metrics["steady"]["passes"])


def capacity(cl: Cluster, sp: PhasedSpec, system: Setting | Oracle, start: float,
             tol: float) -> tuple[float, list[Point]]:
    """Highest passing load scale within ``tol`` (``search.find_capacity``)."""
    first = system if isinstance(system, Setting) else system[0][0]
    return find_capacity(cl, first, 0, start, tol, _passes,
                         point=lambda q: run_point(cl, sp, system, q))


def _record(cap: float, pts: list[Point]) -> dict[str, Any]:
    at = next((p for p in pts if p.qps == cap), None)
    return {"capacity_scale": cap,
            "offered_rps": at.metrics["steady"]["offered_rps"] if at else None,
            "at_capacity": at.metrics["steady"] if at else None,
            "points": sorted(({"scale": p.qps, "requests": p.requests,
                               "attainment": p.metrics["steady"]["attainment"],
                               "keeps_up": p.metrics["steady"]["keeps_up"],
                               "phases_ok": p.metrics["steady"]["phases_ok"],
                               "passes": p.metrics["steady"]["passes"]} for p in pts),
                             key=lambda d: d["scale"])}


def length_check_of(cl: Cluster, sp: PhasedSpec, s: Setting, cap: float) -> dict[str, Any]:
    """The run-length check with the profile played twice, by probes where they settle it:
    passing at ``cap / (1 + LENGTH_TOL)`` means the longer run's figure is not more than 5%
    lower, and failing at ``cap * (1 + LENGTH_TOL)`` that it is not more than 5% higher; only a
    failing lower probe has the longer run's capacity searched (it then sets the figure, as in
    ``sweep.py``). A passing upper probe is recorded as a rise (the shorter figure stands, the
    conservative one)."""
    two = sp.repeated(2)
    lo = run_point(cl, two, s, cap / (1 + LENGTH_TOL))
    n = 2 * len(_built(sp, cap, cl.seed).workload)
    if not _passes(lo):
        cap2, pts2 = capacity(cl, two, s, lo.qps, FINE_TOL)
        rec = _record(cap2, pts2)
        return {**run_length(cap, cap2, n), "capacity_scale": cap2, "profile_repeats": 2,
                "verdict": f"{cap2} (searched)", "at_capacity": rec["at_capacity"],
                "points": rec["points"]}
    hi = run_point(cl, two, s, cap * (1 + LENGTH_TOL))
    probes = [{"scale": p.qps, "passes": _passes(p),
               "attainment": p.metrics["steady"]["attainment"]} for p in (lo, hi)]
    rises = _passes(hi)
    return {"requests": n, "profile_repeats": 2, "capacity_scale": None,
            "ok": not rises, "sets_figure": False, "rises": rises, "probes": probes,
            "verdict": f"within 5% below{'; passes 5% above' if rises else ' and above'}"}


def _length_checked(cl: Cluster, sp: PhasedSpec, s: Setting, cap: float, pts: list[Point]
                    ) -> dict[str, Any]:
    """The record of setting ``s`` with its run-length check; a fall of more than 5% makes the
    profile-twice capacity its figure (``capacity_from = "2x run"``)."""
    rec = {"setting": dict(s.knobs), "label": s.label(), **_record(cap, pts)}
    rl = rec["run_length"] = length_check_of(cl, sp, s, cap)
    if rl["sets_figure"]:
        rec.update(capacity_from="2x run", short_run_scale=cap,
                   capacity_scale=rl["capacity_scale"], at_capacity=rl.pop("at_capacity"))
    return rec


def _try(cl: Cluster, sp: PhasedSpec, policy: str, s: Setting, best: Setting, best_cap: float,
         trials: list, known: dict[Setting, float], log, knob: str | None = None
         ) -> tuple[Setting, float]:
    """``sweep.py``'s step 2 for one setting: probed just above the best so far, searched at
    ``COARSE_TOL`` only where the probe passes; returns the (possibly new) best."""
    row: dict[str, Any] = {"knob": knob} if knob else {}
    probe_at = best_cap * (1 + COARSE_TOL) if best_cap > 0 else START
    probe = run_point(cl, sp, s, probe_at)
    if best_cap > 0 and not _passes(probe):
        trials.append({**row, "setting": s.label(), "capacity_scale": None,
                       "fails_at_scale": probe.qps})
        known[s] = probe.qps
        log(f"  {policy} {s.label()}: fails at {probe.qps}")
        return best, best_cap
    cap, _ = capacity(cl, sp, s, probe_at, COARSE_TOL)
    trials.append({**row, "setting": s.label(), "capacity_scale": cap})
    known[s] = cap
    log(f"  {policy} {s.label()}: {cap}")
    return (s, cap) if cap > best_cap else (best, best_cap)


def _descend(cl: Cluster, sp: PhasedSpec, policy: str, best: Setting, best_cap: float,
             trials: list, known: dict[Setting, float], log) -> tuple[Setting, float]:
    """The single-trace sweeps' coordinate descent (``tuning.knobs_for``: the server's knobs,
    the schedule policy, the router for the two replicas) over the whole workload, from the
    best candidate: every value of each knob with the others at their best so far."""
    for knob in knobs_for(policy, GPUS, MODEL, tp=TP):
        for value in knob.values:
            s = best.with_knobs(value)
            if s != best and s not in known:
                best, best_cap = _try(cl, sp, policy, s, best, best_cap, trials, known, log,
                                      knob.name)
    return best, best_cap


def sweep_system(cl: Cluster, sp: PhasedSpec, policy: str, length_check: bool = True,
                 oracle: bool = True, log=print) -> dict[str, Any]:
    """Defaults, tuned once (with its run-length check) and the per-phase oracle of one system.
    Tuned once: the best of the candidates (`candidates`), then `_descend` from it."""
    t0 = time.perf_counter()
    best_by_trace = per_trace_best(policy)
    cands = candidates(policy, best_by_trace)
    default = cands[0]
    # the defaults at the coarse tolerance, refined below when they win (or for duet, whose
    # defaults are a headline figure); the other candidates as sweep.py's step 2
    cap0, pts0 = capacity(cl, sp, default, START, COARSE_TOL)
    log(f"  {policy} defaults: {cap0}")
    best, best_cap, trials = default, cap0, [{"setting": default.label(), "capacity_scale": cap0}]
    known_caps: dict[Setting, float] = {default: cap0}  # shorter-run capacity, or failing scale
    for s in cands[1:]:
        best, best_cap = _try(cl, sp, policy, s, best, best_cap, trials, known_caps, log)
    best, best_cap = _descend(cl, sp, policy, best, best_cap, trials, known_caps, log)
    best_cap, pts = capacity(cl, sp, best, best_cap or START, FINE_TOL)
    if best == default:
        cap0, pts0 = best_cap, pts
    elif policy == "duet":
        cap0, pts0 = capacity(cl, sp, default, cap0 or START, FINE_TOL)
    tuned = {"setting": dict(best.knobs), "label": best.label(), **_record(best_cap, pts)}
    known = {**known_caps, default: cap0, best: best_cap}
    if length_check and best_cap > 0:
        tuned = _length_checked(cl, sp, best, best_cap, pts)
        if tuned.get("capacity_from"):  # another candidate may hold up better (sweep.py step 3)
            checks = [{"setting": best.label(), "capacity_scale": tuned["capacity_scale"]}]
            for s, c in sorted(known.items(), key=lambda kv: -kv[1]):
                if s == best or c <= tuned["capacity_scale"]:
                    continue
                c, p = capacity(cl, sp, s, c, FINE_TOL)
                if c <= tuned["capacity_scale"]:
                    continue
                other = _length_checked(cl, sp, s, c, p)
                checks.append({"setting": s.label(), "capacity_scale": other["capacity_scale"]})
                if other["capacity_scale"] > tuned["capacity_scale"]:
                    best, tuned = s, other
            tuned["length_checked"] = checks
        log(f"  {policy} tuned once ({best.label()}): {tuned['capacity_scale']}, profile x2: "
            f"{tuned['run_length']['verdict']}")
    out: dict[str, Any] = {"candidates": [c.label() for c in cands], "trials": trials,
                           "default": {"setting": {}, "label": "defaults",
                                       **_record(cap0, pts0)},
                           "tuned_once": tuned}
    if oracle:
        out["oracle"] = oracle_of(cl, sp, best, tuned["capacity_scale"], best_by_trace, log)
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def oracle_of(cl: Cluster, sp: PhasedSpec, tuned: Setting, tuned_cap: float,
              best_by_trace: dict[str, Setting], log=print) -> dict[str, Any]:
    """The per-phase oracle's capacity: each phase re-tuned (`oracle_settings`) on a fresh
    cluster (``switching_scale``), or never switching, which is the tuned-once capacity
    (``tuned_cap``); ``capacity_scale`` is the higher, as an oracle would choose."""
    per_phase = oracle_settings(sp, best_by_trace, tuned)
    cap, pts = capacity(cl, sp, per_phase, tuned_cap or START, FINE_TOL)
    log(f"  {tuned.policy} oracle: {cap} switching, {tuned_cap} tuned once")
    rec = {"settings": [[s.label() for s in alts] for alts in per_phase], **_record(cap, pts),
           "switching_scale": cap}
    if tuned_cap > cap:  # a fresh cluster per phase (a cold prefix cache) costs more
        rec.update(capacity_scale=tuned_cap, offered_rps=None, at_capacity=None,
                   capacity_from="tuned once (no switch)")
    return rec


def run(name: str, systems: tuple[str, ...], out_dir: str, length_check: bool, oracle: bool,
        oracle_only: bool = False) -> dict[str, Any]:
    """Every system on workload ``name``; writes (and returns) its stamped JSON.
    ``oracle_only``: keep each system's committed defaults and tuned once, redo its oracle."""
    sp = spec(name)
    cl = Cluster(trace=f"phased:{name}", model=MODEL, tp=TP, gpus=GPUS)
    path = os.path.join(out_dir, f"{name}.json")
    done: dict[str, Any] = {}
    if os.path.exists(path):  # systems already swept and not asked for again are kept
        with open(path) as f:
            done = json.load(f).get("systems", {})
    def log(m: str) -> None:
        print(m, file=sys.stderr, flush=True)

    for policy in systems:
        log(f"{name}: {policy}")
        if oracle_only:
            if policy not in done:
                raise SystemExit(f"--oracle-only: {path} holds no tuned once for {policy}; "
                                 "run it without --oracle-only first")
            t = done[policy]["tuned_once"]
            tuned = Setting(policy, tuple(sorted(t["setting"].items())))
            done[policy]["oracle"] = oracle_of(cl, sp, tuned, t["capacity_scale"],
                                               per_trace_best(policy), log)
        else:
            done[policy] = sweep_system(cl, sp, policy, length_check, oracle, log=log)
        payload = {"config": {"workload": sp.to_dict(), "model": MODEL, "tp": TP, "gpus": GPUS,
                              "hardware": cl.hardware, "seed": cl.seed,
                              "tbt_slo_ms": cl.tbt_slo_ms, "ttft_slo_ms": cl.ttft_slo_ms,
                              "target": cl.target, "timeline_bin_s": BIN_S,
                              "source_hash": source_hash()},
                   "systems": {p: done[p] for p in SYSTEMS if p in done}}
        write_result(path, payload)  # after every system: an interrupted sweep keeps what ran
    with open(path) as f:
        return json.load(f)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmark.capacity.changing",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="all", help="a name in phased_workloads.json, or all")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--no-length-check", action="store_true")
    ap.add_argument("--no-oracle", action="store_true")
    ap.add_argument("--oracle-only", action="store_true",
                    help="redo only the oracle of each system, from its committed tuned once")
    ap.add_argument("--report-only", action="store_true", help="tables and plots from the JSON")
    args = ap.parse_args(argv)
    from .changing_report import write_report

    names = list(load_specs()) if args.workload == "all" else [args.workload]
    if not args.report_only:
        CACHE.open(args.out)
        systems = tuple(s for s in args.systems.split(",") if s)
        for bad in set(systems) - set(SYSTEMS):
            ap.error(f"unknown system {bad!r}; choices: {', '.join(SYSTEMS)}")
        for policy in systems:  # every workload per system: a cut-short sweep has both
            for name in names:
                run(name, (policy,), args.out, not args.no_length_check, not args.no_oracle,
                    args.oracle_only)
    write_report(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
