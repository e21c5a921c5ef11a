"""Tables and plots of the changing-workload capacities (``changing.py``'s JSON).

``write_report(out_dir)`` writes ``README.md`` (per workload: each system's capacity at its
defaults, tuned once and per-phase oracle, the ratios of duet at its defaults to each, and how
every phase fares at each system's tuned-once capacity) and one ``<workload>.png`` per workload
(attainment per ``BIN_S``-second bin against time at each system's capacity). The figures are
shown by the README, so they are committed (``git add -f``: ``.gitignore`` keeps capacity PNGs
out unless a tracked page shows them). Load scale: the multiplier of the whole profile's rate.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any

__all__ = ["ratios", "write_report"]

ORDER = ("duet", "sglang-pdmux", "sglang-chunked", "vllm-chunked", "dynamo")


def _cap(rec: dict[str, Any] | None) -> float | None:
    return None if not rec else rec.get("capacity_scale")


def ratios(systems: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Duet at its defaults over each alternative's tuned-once and oracle capacities, and duet
    tuned once over each alternative tuned once."""
    duet = systems.get("duet")
    if not duet:
        return {}
    d0, d1 = _cap(duet["default"]), _cap(duet["tuned_once"])
    out = {}
    for name, r in systems.items():
        if name == "duet":
            continue
        alt, orc = _cap(r["tuned_once"]), _cap(r.get("oracle"))

        def div(a: float | None, b: float | None) -> float | None:
            return round(a / b, 3) if a and b else None

        out[name] = {"duet_default_over_tuned_once": div(d0, alt),
                     "duet_tuned_once_over_tuned_once": div(d1, alt),
                     "duet_default_over_oracle": div(d0, orc)}
    return out


def _oracle_cell(o: dict[str, Any] | None) -> str:
    """The oracle's capacity; where never switching beats re-tuning per phase on a fresh
    cluster, says so with the switching figure."""
    if o and o.get("capacity_from"):
        return f"{_fmt(_cap(o))} (no switch; switching {_fmt(o.get('switching_scale'))})"
    return _fmt(_cap(o))


def _verdict(systems: dict[str, Any]) -> list[str]:
    """Issue #50's targets against the figures: duet at its defaults >= 1.2x every alternative
    tuned once, and not below any alternative's oracle by more than 5%."""
    duet = systems.get("duet")
    alts = {p: r for p, r in systems.items() if p != "duet" and _cap(r["tuned_once"])}
    if not duet or not alts or not _cap(duet["default"]):
        return []
    d0 = _cap(duet["default"])
    best = max(alts, key=lambda p: _cap(alts[p]["tuned_once"]))
    r1 = d0 / _cap(alts[best]["tuned_once"])
    out = ["", f"Duet at its defaults ({d0:.3f}) / the best alternative tuned once ({best}, "
           f"{_cap(alts[best]['tuned_once']):.3f}): **{r1:.3f}x** (target >= 1.2x: "
           f"{'met' if r1 >= 1.2 else 'not met'})."]
    orc = {p: _cap(r.get("oracle")) for p, r in alts.items() if _cap(r.get("oracle"))}
    if orc:
        top = max(orc, key=lambda p: orc[p])
        r2 = d0 / orc[top]
        out[-1] += (f" Against the best alternative's per-phase oracle ({top}, {orc[top]:.3f}): "
                    f"**{r2:.3f}x** (target >= 0.95x: {'met' if r2 >= 0.95 else 'not met'}).")
    return out


def _fmt(x: Any, nd: int = 3) -> str:
    return "–" if x is None else f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def _workload_md(name: str, d: dict[str, Any], png: str | None) -> list[str]:
    wl, systems = d["config"]["workload"], d["systems"]
    lines = [f"## {name}", "", wl["description"], "",
             f"Commit `{d['stamp']['commit']}`, {d['stamp']['date']}; "
             f"`{d['stamp']['command']}`.", "",
             "| system | defaults | tuned once: setting | scale | req/s | profile x2 | "
             "oracle per phase | duet default / this |",
             "|---|---|---|---|---|---|---|---|"]
    rat = ratios(systems)
    for p in ORDER:
        if p not in systems:
            continue
        r = systems[p]
        t, o = r["tuned_once"], r.get("oracle")
        rl = t.get("run_length")
        if not rl:
            x2 = "–"
        elif rl.get("capacity_scale") is None:  # settled by probes at -5% and +5%
            x2 = "within 5%" if rl["ok"] else "passes +5% (rise)"
        else:
            x2 = f"{rl['capacity_scale']:.3f} ({rl['ratio']:.2f}x{'' if rl['ok'] else ', >5%'})"
        ratio = rat.get(p, {})
        rs = (f"{_fmt(ratio.get('duet_default_over_tuned_once'), 2)}x tuned once, "
              f"{_fmt(ratio.get('duet_default_over_oracle'), 2)}x oracle" if ratio else "–")
        lines.append(f"| {p} | {_fmt(_cap(r['default']))} | {t['label']} | "
                     f"**{_fmt(_cap(t))}**{' (x2 run)' if t.get('capacity_from') else ''} | "
                     f"{_fmt(t.get('offered_rps'), 1)} | {x2} | {_oracle_cell(o)} | {rs} |")
    lines += _verdict(systems)
    lines += ["", "How each phase fares at each system's tuned-once capacity: share of the "
              "phase's window requests meeting both SLOs / P99 / max TTFT (s); (k): the "
              "steady-state keep-up statistics over the phase's own span fail (reported, not "
              "gating: at a switch they count the previous phase's late admissions, and a "
              "Mooncake phase's 100 requests give its TTFT rise a noise of about 1 s, "
              "`changing_rule.py`); – : fewer than 20 of its requests in the window.", ""]
    head = [p for p in ORDER if p in systems]
    lines += ["| phase | mix | " + " | ".join(head) + " |", "|---|---|" + "---|" * len(head)]
    for i, ph in enumerate(wl["phases"]):
        mix = ", ".join(f"{k} {v:g}" for k, v in ph["mix"].items() if v)
        cells = []
        for p in head:
            at = systems[p]["tuned_once"].get("at_capacity") or {}
            rows = at.get("phases") or []
            row = rows[i] if i < len(rows) else {}
            cells.append(f"{_fmt(row.get('attainment'), 2)} / {_fmt(row.get('ttft_p99_s'), 1)}"
                         f" / {_fmt(row.get('ttft_max_s'), 1)}"
                         f"{'' if row.get('keeps_up', True) else ' (k)'}"
                         if row.get("gating") else "–")
        lines.append(f"| {i} {ph['label']} | {mix} | " + " | ".join(cells) + " |")
    if png:
        lines += ["", f"![attainment against time, {name}]({png})"]
    return lines + [""]


def _plot(name: str, d: dict[str, Any], path: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    bin_s = d["config"]["timeline_bin_s"]
    fig, ax = plt.subplots(figsize=(7.0, 3.0), dpi=80)
    low: list[float] = []
    for p in ORDER:
        r = d["systems"].get(p)
        if not r:
            continue
        for key, style in (("tuned_once", "-"), ("default", ":")):
            if key == "default" and p != "duet":
                continue
            at = (r[key].get("at_capacity") or {}).get("timeline")
            if not at:
                continue
            xs = [bin_s * (i + 0.5) for i, v in enumerate(at) if v is not None]
            ys = [v for v in at if v is not None]
            low += ys
            ax.plot(xs, ys, style, lw=1.2,
                    label=f"{p} {'defaults' if key == 'default' else 'tuned once'} "
                          f"@{_cap(r[key]):.2f}")
    end = sum(ph["duration_s"] for ph in d["config"]["workload"]["phases"])
    ax.set_xlim(0, end)  # a figure set by the profile played twice: its first pass shown
    ax.set_ylim(max(0.0, min(low) - 0.05) if low else 0.0, 1.02)
    t = 0.0
    for ph in d["config"]["workload"]["phases"]:
        t += ph["duration_s"]
        ax.axvline(t, color="0.85", lw=0.6)
    ax.axhline(0.9, color="0.5", lw=0.6, ls="--")
    ax.set(xlabel="arrival time (s)", ylabel="met both SLOs",
           title=f"{name}: attainment per {bin_s:g} s at each system's capacity")
    ax.legend(fontsize=6, loc="lower left", ncol=2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def write_report(out_dir: str) -> str:
    """README.md and the PNGs from every workload JSON in ``out_dir``; returns the README."""
    lines = ["# Capacity on changing traffic (simulator)", "",
             "Load scale (x the whole profile's rate, `sglang_duet/sim/phased_workloads.json`) "
             "at which a run keeps up (admissions >= 0.97x arrivals over the steady-state window; "
             "the TTFT-rise half of the steady-state rule is reported, not gating, as a profile "
             "moves TTFT with no queue growing) and >= 90% of the window's "
             "requests, and of every phase's, meet both SLOs (P99 TBT <= 100 ms per request, "
             "TTFT <= 10 s): `benchmark/capacity/changing.py` and `changing_rule.py`. "
             "Qwen3-8B, TP=1, 2 H100 GPUs (two replicas; Dynamo 1P1D), simulated "
             "(`published-h100`). *Tuned once* is each system's best single static setting, "
             "found by the single-trace sweeps' coordinate descent over its knobs "
             "(schedule policy and router included) run on the whole workload, from the best of "
             "its defaults and its per-trace best settings; *oracle per phase* runs each "
             "phase on its own with whichever serves it better of the per-trace best setting "
             "of its dominant trace and the tuned-once setting (an empty cluster at each "
             "phase start), or never switching where that serves more: an upper reference. "
             "`python -m benchmark.capacity.changing` regenerates all of it; `--systems` "
             "reruns replace only the systems named (`--oracle-only`: only their oracle, "
             "from the committed tuned once), and the stamp "
             "names the last run that wrote the file (`config.source_hash`: the simulator's "
             "sources every figure came from).", ""]
    for path in sorted(glob.glob(os.path.join(out_dir, "*.json"))):
        name = os.path.basename(path)[: -len(".json")]
        with open(path) as f:
            d = json.load(f)
        png = f"{name}.png" if _plot(name, d, os.path.join(out_dir, f"{name}.png")) else None
        lines += _workload_md(name, d, png)
    out = os.path.join(out_dir, "README.md")
    with open(out, "w") as f:
        f.write("\n".join(lines))
    return out
