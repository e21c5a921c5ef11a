"""Sim/real ratios per system, load point and metric, against the issue's targets.

Targets (issue 22, item 6): P50/P99 TTFT and TBT within +-25% (ratio sim/real in [0.75, 1.25])
at every load point, saturation throughput within +-15% (the highest load point, when it is
overloaded: the real server completed less than `SATURATED` of the offered rate).
"""

from __future__ import annotations

from benchmark.sim_to_real.simulate import METRICS

# column titles of the simulation variants (`compare_runs`)
VARIANTS = {"plain": "no overlap rule", "shared": "duet's profile", "page16": "16-token pages"}
LATENCY_TOL = 0.25
THROUGHPUT_TOL = 0.15
SATURATED = 0.9


def ratio(sim: float | None, real: float | None) -> float | None:
    if sim is None or real is None or real <= 0:
        return None
    return round(sim / real, 3)


def compare_runs(real_runs: list[dict], sim_runs: dict[float, dict],
                 variants: dict[str, dict[float, dict]] | None = None) -> list[dict]:
    """One row per (load point, metric): real, sim, ratio, target, ok; `variants`: other
    simulations of the same points (e.g. without the overlap emission rule), each ratio in
    ``ratio_<name>``."""
    rows = []
    last = max((r["qps"] for r in real_runs if r.get("metrics")), default=None)
    for run in real_runs:
        m = run.get("metrics")
        if not m:
            continue
        q = run["qps"]
        s = sim_runs.get(q, {})
        saturated = q == last and (m["throughput_rps"] or 0) < SATURATED * q
        for key in METRICS:
            tol = THROUGHPUT_TOL if key == "throughput_rps" else LATENCY_TOL
            r = ratio(s.get(key), m.get(key))
            targeted = key != "throughput_rps" or saturated
            row = {"qps": q, "metric": key, "real": m.get(key), "sim": s.get(key), "ratio": r,
                   "target": f"+-{tol:.0%}" if targeted else None,
                   "ok": (r is not None and abs(r - 1) <= tol) if targeted else None,
                   "others_cores": run.get("cpu", {}).get("others_cores")}
            for name, runs in (variants or {}).items():
                row[f"ratio_{name}"] = ratio(runs.get(q, {}).get(key), m.get(key))
            rows.append(row)
    return rows


SCHEDULE_KEYS = ("decode_only_iterations", "mixed_iterations", "prefill_only_iterations",
                 "decode_rows_mean", "decode_rows_max", "prefill_tokens_mean")


def compare_schedules(real_runs: list[dict], sim_runs: dict[float, dict],
                      page16: dict[float, dict] | None = None) -> list[dict]:
    """Per load point, what SGLang's log says the server ran (`sglang_log`) next to what the
    simulator ran, for duet the loop seconds per iteration kind (plan log vs simulator), and
    the running decodes the simulator reached with its former 16-token pages (`page16`)."""
    rows = []
    for run in real_runs:
        real, sim = run.get("schedule"), sim_runs.get(run["qps"], {})
        if not real or not sim.get("schedule"):
            continue
        row = {"qps": run["qps"], **{k: (real.get(k), sim["schedule"].get(k))
                                     for k in SCHEDULE_KEYS}}
        if run.get("busy_s"):
            row["busy_s"] = {k: (v, sim["busy_s"].get(k)) for k, v in run["busy_s"].items()}
        if page16 and page16.get(run["qps"], {}).get("schedule"):
            row["decode_rows_max_page16"] = page16[run["qps"]]["schedule"]["decode_rows_max"]
        rows.append(row)
    return rows


def schedule_table(rows: list[dict]) -> str:
    if not rows:
        return ""
    busy = any("busy_s" in r for r in rows)
    p16 = any("decode_rows_max_page16" in r for r in rows)
    head = "| QPS | " + " | ".join(k.replace("_", " ") for k in SCHEDULE_KEYS) + " |"
    head += " sim decode rows max, 16-token pages |" if p16 else ""
    head += " busy s decode / mixed / prefill-only |" if busy else ""
    out = ["\nSchedule, real (SGLang's log) / sim:\n", head,
           "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        cells = [_fmt(r["qps"])] + [f"{_fmt(r[k][0])} / {_fmt(r[k][1])}" for k in SCHEDULE_KEYS]
        if p16:
            cells.append(_fmt(r.get("decode_rows_max_page16")))
        if busy:
            b = r.get("busy_s") or {}
            cells.append(", ".join(f"{_fmt(b[k][0])} / {_fmt(b[k][1])}" for k in
                                   ("decode_only", "mixed", "prefill_only") if k in b))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def _fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "**no**"
    return f"{x:g}" if isinstance(x, float) else str(x)


def table(results: dict) -> str:
    """Markdown: per system, the rows of `compare_runs`."""
    out = []
    for name, entry in results["systems"].items():
        rows = entry.get("comparison") or []
        out.append(f"\n### {name}\n")
        if not rows:
            out.append(f"not compared: {entry.get('status')} {entry.get('reason') or ''}\n")
            continue
        extra = [k for k in rows[0] if k.startswith("ratio_")]
        head = "| QPS | metric | real | sim | sim/real |" + "".join(
            f" {VARIANTS.get(k[6:], k[6:])} |" for k in extra)
        out.append(head + " target | ok | others (cores) |")
        out.append("|" + "---|" * (head.count("|") + 2))
        for r in rows:
            cells = [r["qps"], r["metric"], r["real"], r["sim"], r["ratio"]]
            cells += [r[k] for k in extra]
            cells += [r["target"], r["ok"], r["others_cores"]]
            out.append("| " + " | ".join(_fmt(c) for c in cells) + " |")
        out.append(schedule_table(entry.get("schedule_comparison") or []))
        rep = entry.get("repeatability") or []
        if rep:
            out.append("\nRepeatability, a second real pass / the first (same server, same "
                       "requests):\n")
            out.append("| QPS | " + " | ".join(METRICS) + " |")
            out.append("|" + "---|" * (len(METRICS) + 1))
            for q in sorted({r["qps"] for r in rep}):
                by = {r["metric"]: r["ratio"] for r in rep if r["qps"] == q}
                out.append(f"| {_fmt(q)} | " + " | ".join(_fmt(by.get(k)) for k in METRICS)
                           + " |")
    return "\n".join(out) + "\n"


def verdict(results: dict) -> dict:
    """Targeted rows met / total, per system and overall."""
    per = {}
    for name, entry in results["systems"].items():
        rows = [r for r in entry.get("comparison") or [] if r["ok"] is not None]
        per[name] = {"met": sum(r["ok"] for r in rows), "targeted": len(rows)}
    total = {"met": sum(v["met"] for v in per.values()),
             "targeted": sum(v["targeted"] for v in per.values())}
    return {"per_system": per, "all": total}



PROFILE_KEYS = ("samples", "heldout_mape", "heldout_p90", "sched_gap_ms_median")


def markdown(results: dict, tag: str) -> str:
    """The whole report: verdict, each system's effective settings, the CPU profile and the
    host shares, then every system's table."""
    v = results["verdict"]
    per = ", ".join(f"{k} {x['met']}/{x['targeted']}" for k, x in v["per_system"].items())
    out = [f"# Simulator vs real SGLang on this CPU ({tag})\n",
           f"Targets met: {v['all']['met']} of {v['all']['targeted']} ({per}).\n"]
    if results.get("measured"):
        m = results["measured"]
        out.append(f"Real runs: commit {m.get('commit')}, {m.get('date')}, `{m.get('command')}`; "
                   "simulated again from their logs (`--reuse`).\n")
    out += ["| system | server settings (as logged) | sim budget | sim calibration | its "
            "iterations, held-out MAPE |", "|---|---|---|---|---|"]
    prof = results.get("profile") or {}
    own = prof.get("per_system") or {}
    for name, e in results["systems"].items():
        fit = prof if name == "duet-aggregated" else own.get(name, {})
        out.append(f"| {name} | {_fmt(e.get('settings'))} | {_fmt(e.get('sim_budget'))} | "
                   f"{_fmt(e.get('sim_calibration'))} | {_fmt(fit.get('samples'))}, "
                   f"{_fmt(fit.get('heldout_mape'))} |")
    if own.get("duet-aggregated", {}).get("heldout_mape") is not None:
        d = own["duet-aggregated"]
        out.append(f"\nCheck of the log method: duet's own SGLang log gives "
                   f"{d['samples']} periods, held-out MAPE {d['heldout_mape']} (its plan log: "
                   f"{prof.get('samples')}, {prof.get('heldout_mape')}).")
    out.append("\nCPU profile: " + ", ".join(f"{k} {_fmt(prof.get(k))}" for k in PROFILE_KEYS))
    shares = (prof.get("host_share") or {}).get("classes") or {}
    if shares:
        out += ["\nHost share (tiny model's loop period / this model's, same requests):\n",
                "| iterations | model ms | tiny ms | host share |", "|---|---|---|---|"]
        out += [f"| {k} | {c['model_ms']} | {c['tiny_ms']} | {c['host_share']} |"
                for k, c in shares.items()]
    return "\n".join(out) + "\n" + table(results)
