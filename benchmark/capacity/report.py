"""The capacity sweep's plot (window attainment against QPS at each policy's best setting, runs
that do not keep up marked) and its markdown table (default and best-tuned capacity per policy,
the setting, the run-length check, Sarathi-Serve's capacity, saturation, duet's ratios).

The alternatives to duet are every other system at its best-tuned setting and the reference rows
a sweep adds (`sweep.sweep_policy` step 5): ``<policy>+hrrn``, the best setting under SGLang's
``hrrn`` schedule policy, which exists only after SGLang 0.5.17 (`alternatives`; the tables
name it so)."""

from __future__ import annotations

import glob
import json
import os
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"duet": "tab:red", "duet-paper": "salmon", "vllm-chunked": "tab:blue",
          "sglang-chunked": "tab:cyan", "sglang-default": "tab:gray",
          "sglang-pdmux": "tab:purple", "dynamo": "tab:orange"}
AGGREGATED = ("vllm-chunked", "sglang-chunked", "sglang-default")
OURS = ("duet", "duet-paper")
# a sweep's reference rows: JSON key under the policy -> suffix of the alternative's name
REFERENCES = {"reference_hrrn": "+hrrn"}
AFTER_0_5_17 = "SGLang after 0.5.17"


def stem(cfg: dict[str, Any]) -> str:
    """File stem of one sweep: trace, model, TP, GPUs when not 2 (and any overrides)."""
    cl = cfg["cluster"]
    base = f"{os.path.basename(cl['trace']).split('.')[0]}-{cl['model']}-tp{cl['tp']}"
    if cl["gpus"] != 2:
        base += f"-{cl['gpus']}gpu"
    extra = "".join(f"-{k}{v:g}" if isinstance(v, float) else f"-{k}{v}"
                    for k, v in sorted((cl.get("base") or {}).items()))
    return base + extra


def title(cfg: dict[str, Any]) -> str:
    cl = cfg["cluster"]
    over = ", ".join(f"{k}={v}" for k, v in sorted((cl.get("base") or {}).items()))
    return (f"{cl['trace']} ({cfg['requests']} req per run), {cl['model']} TP={cl['tp']} on "
            f"{cl['gpus']}x {cl['hardware']}, tau={cl['tbt_slo_ms']:g} ms, "
            f"TTFT SLO {cl['ttft_slo_ms'] / 1e3:g} s" + (f", {over}" if over else ""))


def capacity(r: dict[str, Any], which: str = "best") -> float:
    return float(r[which]["capacity_qps"])


def alternatives(pols: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every alternative to duet by name: (its policy, its entry: the best-tuned one, or a
    reference row's, each with ``setting``, ``label``, ``capacity_qps`` and any
    ``run_length``). Reference rows are named ``<policy>+hrrn``."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for p, r in pols.items():
        if p in OURS:
            continue
        out[p] = (p, r["best"])
        for key, suffix in REFERENCES.items():
            if r.get(key):
                out[p + suffix] = (p, r[key])
    return out


def shown(name: str) -> str:
    """An alternative's name in the tables: reference rows say which SGLang they need."""
    if any(name.endswith(suffix) for suffix in REFERENCES.values()):
        return f"{name} ({AFTER_0_5_17})"
    return name


def ratios(result: dict[str, Any], ours: str = "duet") -> dict[str, Any]:
    """duet's best-tuned capacity over each alternative's (reference rows included), and the
    best of them (named)."""
    pols = result["policies"]
    if ours not in pols:
        return {}
    c = capacity(pols[ours])
    others = {name: float(e["capacity_qps"]) for name, (_, e) in alternatives(pols).items()}
    out: dict[str, Any] = {f"vs_{p}": (round(c / v, 3) if v else None)
                           for p, v in others.items()}
    if others:
        best = max(others, key=lambda p: others[p])
        out["best_alternative"] = best
        out["vs_best_alternative"] = round(c / others[best], 3) if others[best] else None
    agg = [others[p] for p in AGGREGATED if p in others]
    if agg and max(agg):
        out["vs_best_aggregated"] = round(c / max(agg), 3)
    return out


def plot(result: dict[str, Any], path: str) -> None:
    cfg = result["config"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for pol, r in result["policies"].items():
        pts = [p for p in r["best"]["points"] if p["requests"] == cfg["requests"]]
        q = [p["qps"] for p in pts]
        a = [p["attainment"] for p in pts]
        ax.plot(q, a, marker="o", ms=3, lw=1, color=COLORS.get(pol),
                label=f"{pol} ({r['best']['capacity_qps']:g})")
        bad = [(p["qps"], p["attainment"]) for p in pts if not p["keeps_up"]]
        if bad:
            ax.scatter(*zip(*bad, strict=True), marker="x", s=30, color=COLORS.get(pol))
    ax.axhline(cfg["cluster"]["target"], color="k", ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("Poisson QPS (req/s); x = does not keep up")
    ax.set_ylabel("window requests meeting both SLOs")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title(title(cfg) + ", best-tuned", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _num(v: float | None, nd: int = 1) -> str:
    return "-" if v is None else f"{v:,.{nd}f}"


def _cap(v: float) -> str:
    return f"{v:.3g}" if v < 10 else f"{v:.1f}"


def markdown(result: dict[str, Any]) -> str:
    cfg = result["config"]
    cl = cfg["cluster"]
    lines = [f"### {title(cfg)}", "",
             "Capacity = highest Poisson QPS at which the run keeps up (admitted >= 0.97x offered "
             "over the steady-state window, TTFT rising <= 1 s across it) and >= "
             f"{cl['target']:.0%} of the window's requests meet both SLOs (`sim/steady.py`). "
             "Each system runs behind its own default router (SGLang's round-robin, vLLM's "
             "balancer, which alternates for a dense model, sglang-duet's latency-model "
             "router: `PolicySpec.router`). "
             "Best-tuned: coordinate descent over each system's knobs (`tuning.py`), with "
             "more than one replica the router its users can pick last. "
             "2x run: the best setting's capacity with twice the requests; where it fell by "
             "more than 5%, the best-tuned capacity is the 2x run's, and every other setting "
             "tried whose shorter run beat that figure (one whose tuning probe failed "
             "searched first) is length-checked too, the highest figure "
             "winning (defaults: the shorter run's). Sarathi: median "
             "scheduling delay <= 2 s and P99 TBT <= tau. Saturation: served req/s at twice "
             "the capacity. At capacity: P99 TBT over all gaps, P99 TTFT.", "",
             "| policy | default | best-tuned | best setting | 2x run | Sarathi | saturation "
             "| P99 TBT (ms) | P99 TTFT (ms) |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for pol, r in result["policies"].items():
        b = r["best"]
        m = b.get("at_capacity") or {}
        rl = b.get("run_length")
        rl_cell = "-" if not rl else (f"{_cap(rl['capacity_qps'])} ({rl['ratio']:.2f}x"
                                      f"{'' if rl['ok'] else ', MOVED'})")
        if b.get("capacity_from"):  # the best-tuned figure is the longer run's
            rl_cell += f" (short run {_cap(b['short_run_qps'])})"
        lines.append(f"| {pol} | {_cap(capacity(r, 'default'))} | {_cap(capacity(r))} | "
                     f"{b['label']} | {rl_cell} | {_cap(b.get('sarathi_qps') or 0.0)} | "
                     f"{_num(b.get('saturation_rps'), 2)} | {_num(m.get('tbt_p99_ms'))} | "
                     f"{_num(m.get('ttft_p99_ms'), 0)} |")
    for pol, r in result["policies"].items():
        for key, suffix in REFERENCES.items():
            if not r.get(key):
                continue
            b = r[key]
            m = b.get("at_capacity") or {}
            rl = b.get("run_length")
            rl_cell = "-" if not rl else (f"{_cap(rl['capacity_qps'])} ({rl['ratio']:.2f}x"
                                          f"{'' if rl['ok'] else ', MOVED'})")
            lines.append(f"| {shown(pol + suffix)} | - | {_cap(float(b['capacity_qps']))} | "
                         f"{b['label']} | {rl_cell} | - | - | {_num(m.get('tbt_p99_ms'))} | "
                         f"{_num(m.get('ttft_p99_ms'), 0)} |")
    rt = ratios(result)
    if rt.get("best_alternative"):
        lines += ["", f"duet / best-tuned best alternative ({shown(rt['best_alternative'])}): "
                  f"{_num(rt['vs_best_alternative'], 2)}x; duet / best aggregated: "
                  f"{_num(rt.get('vs_best_aggregated'), 2)}x."]
    carried = {p: r["carried_from"] for p, r in result["policies"].items()
               if r.get("carried_from")}
    if carried:
        lines += ["", "Carried from an earlier sweep of the same cluster (`--keep-others`; "
                  "the capacity README says why they were not rerun): " +
                  "; ".join(f"{p} at {str(c.get('commit'))[:12]}" for p, c in carried.items())
                  + "."]
    checked = {p: r["best"]["length_checked"] for p, r in result["policies"].items()
               if len(r["best"].get("length_checked", ())) > 1}
    if checked:
        lines += ["", "Settings length-checked after the best one's 2x run fell: " + "; ".join(
            f"{p}: " + ", ".join(f"{c['setting']} {_cap(c['capacity_qps'])}" for c in rows)
            for p, rows in checked.items()) + "."]
    moved = [p for p, r in result["policies"].items()
             if r["best"].get("run_length") and not r["best"]["run_length"]["ok"]]
    lines += ["", "Run-length check: " + ("every best-tuned capacity moved by <= 5% with twice "
                                          "the requests." if not moved else
                                          f"MOVED by > 5% for {', '.join(moved)} (where "
                                          "it fell, the best-tuned figure is the 2x run's)."),
              "", f"Sweep wall time: {result['wall_s']} s.", ""]
    return "\n".join(lines)


def write(result: dict[str, Any], out_dir: str) -> tuple[str, str]:
    """Write ``<stem>.png`` and ``<stem>.md``; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, stem(result["config"]))
    plot(result, base + ".png")
    with open(base + ".md", "w") as f:
        f.write(markdown(result))
    return base + ".png", base + ".md"


INDEX_TITLE = "# Capacity on the simulator"
# below this line the index is written by hand (the figures' history) and every rewrite keeps it
HAND_WRITTEN = "<!-- hand-written below: write_index keeps it -->"


def write_index(out_dir: str) -> str:
    """README.md of the results folder: the summary table (when summary.json exists), then every
    sweep's table, sorted by file name. A README this did not write (a study's own, in a folder
    given to ``--out``) is left as it is."""
    path = os.path.join(out_dir, "README.md")
    kept = ""
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
        if old.split("\n", 1)[0] != INDEX_TITLE:
            return path
        if HAND_WRITTEN in old:
            kept = old[old.index(HAND_WRITTEN):]
    parts = [INDEX_TITLE, "",
             "Written by `python -m benchmark.capacity` and `python -m benchmark.capacity.summary` "
             "(`make capacity`); one section per sweep (`<trace>-<model>-tp<tp>.{json,png,md}`). "
             "Simulated, not measured on GPUs. `before/`: earlier figures, with why they were "
             "wrong.", ""]
    summary = os.path.join(out_dir, "summary.json")
    if os.path.exists(summary):
        from .summary import table

        with open(summary) as f:
            parts += ["## Summary", "", table(json.load(f)), ""]
    for md in sorted(glob.glob(os.path.join(out_dir, "*.md"))):
        if os.path.basename(md) != "README.md":
            with open(md) as f:
                parts.append(f.read())
    if kept:
        parts.append(kept)
    with open(path, "w") as f:
        f.write("\n".join(parts))
    return path
