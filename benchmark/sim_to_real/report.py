"""Sim/real ratios per system, load point and metric, against the issue's targets.

Targets (issue 22, item 6): P50/P99 TTFT and TBT within +-25% (ratio sim/real in [0.75, 1.25])
at every load point, saturation throughput within +-15% (the highest load point, when it is
overloaded: the real server completed less than `SATURATED` of the offered rate).
"""

from __future__ import annotations

from benchmark.sim_to_real.simulate import METRICS

LATENCY_TOL = 0.25
THROUGHPUT_TOL = 0.15
SATURATED = 0.9


def ratio(sim: float | None, real: float | None) -> float | None:
    if sim is None or real is None or real <= 0:
        return None
    return round(sim / real, 3)


def compare_runs(real_runs: list[dict], sim_runs: dict[float, dict],
                 sim_plain: dict[float, dict] | None = None) -> list[dict]:
    """One row per (load point, metric): real, sim, ratio, target, ok; `sim_plain`: the stock
    systems' simulation without the overlap emission rule (its ratio in `ratio_plain`)."""
    rows = []
    last = max((r["qps"] for r in real_runs if r.get("metrics")), default=None)
    for run in real_runs:
        m = run.get("metrics")
        if not m:
            continue
        q = run["qps"]
        s = sim_runs[q]
        saturated = q == last and (m["throughput_rps"] or 0) < SATURATED * q
        for key in METRICS:
            tol = THROUGHPUT_TOL if key == "throughput_rps" else LATENCY_TOL
            r = ratio(s.get(key), m.get(key))
            targeted = key != "throughput_rps" or saturated
            row = {"qps": q, "metric": key, "real": m.get(key), "sim": s.get(key), "ratio": r,
                   "target": f"+-{tol:.0%}" if targeted else None,
                   "ok": (r is not None and abs(r - 1) <= tol) if targeted else None,
                   "others_cores": run.get("cpu", {}).get("others_cores")}
            if sim_plain is not None:
                row["ratio_plain"] = ratio(sim_plain[q].get(key), m.get(key))
            rows.append(row)
    return rows


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
        plain = "ratio_plain" in rows[0]
        head = "| QPS | metric | real | sim | sim/real |" + (" no overlap rule |" if plain else "")
        out.append(head + " target | ok | others (cores) |")
        out.append("|" + "---|" * (head.count("|") + 2))
        for r in rows:
            cells = [r["qps"], r["metric"], r["real"], r["sim"], r["ratio"]]
            if plain:
                cells.append(r["ratio_plain"])
            cells += [r["target"], r["ok"], r["others_cores"]]
            out.append("| " + " | ".join(_fmt(c) for c in cells) + " |")
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
           f"Targets met: {v['all']['met']} of {v['all']['targeted']} ({per}).\n",
           "| system | server settings (as logged) | sim budget |", "|---|---|---|"]
    for name, e in results["systems"].items():
        out.append(f"| {name} | {_fmt(e.get('settings'))} | {_fmt(e.get('sim_budget'))} |")
    prof = results.get("profile") or {}
    out.append("\nCPU profile: " + ", ".join(f"{k} {_fmt(prof.get(k))}" for k in PROFILE_KEYS))
    shares = (prof.get("host_share") or {}).get("classes") or {}
    if shares:
        out += ["\nHost share (tiny model's loop period / this model's, same requests):\n",
                "| iterations | model ms | tiny ms | host share |", "|---|---|---|---|"]
        out += [f"| {k} | {c['model_ms']} | {c['tiny_ms']} | {c['host_share']} |"
                for k, c in shares.items()]
    return "\n".join(out) + "\n" + table(results)
