"""Every sweep of one results folder in one table: duet against the best-tuned alternative, and
each against the physical bound (`bound.py`), with issue #23's target per case.

The target of a case is 1.2x the best-tuned alternative's capacity, or 90% of the physical bound
where 1.2x would pass that; either way duet must not be below the alternative, so where the
alternative itself passes 90% of the bound it is the target. The bound counts decode beside
prefill on disjoint SMs and decodes riding in mixed iterations, so no simulated policy passes it
(test/benchmark/capacity/test_bound.py); the table also gives the looser compute floor (no
weight reads at all, compute and HBM traffic overlapping perfectly), and the queue-aware figure
(`queue_bound.py`: the lower of the physical bound and an estimate of the ideal scheduler's
capacity under the TTFT SLO with the runs' own Poisson arrivals, first come first served, its
decode demand taken at its mean; the strict ceiling, decode free, is ``queue_ceiling_qps``),
which says how much of the gap to the bound is prompts queueing. ``python -m
benchmark.capacity.summary`` writes ``summary.json`` (stamped) and ``summary.png`` in the folder,
the short table (one row per case) into the top-level README and the full table into
``docs/capacity.md``, each between its markers, so the documents' figures are the JSON's
(test/benchmark/capacity/test_readme_table.py holds them equal). Requests per second.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from typing import Any

from benchmark.stamp import ROOT, write_result
from sglang_duet.sim.policies import POLICIES

from .bound import physical_bound
from .queue_bound import BEST_ORDERS, checked_queue_bound
from .report import alternatives, shown, write_index
from .search import Cluster, Setting

__all__ = ["DOC_BEGIN", "DOC_END", "MARK_BEGIN", "MARK_END", "doc_block", "fairness", "limit_of",
           "lower_run",
           "plot", "readme_block", "short_table", "summarize", "table", "target_of",
           "write_block"]

# the README's short table and docs/capacity.md's full one, each between its own markers
MARK_BEGIN = "<!-- capacity-table: python -m benchmark.capacity.summary -->"
MARK_END = "<!-- /capacity-table -->"
DOC_BEGIN = "<!-- capacity-table-full: python -m benchmark.capacity.summary -->"
DOC_END = "<!-- /capacity-table-full -->"
TARGET_RATIO = 1.2
TARGET_BOUND_SHARE = 0.9
MODELS = {"qwen3-8b": "Qwen3-8B", "qwen3-14b": "Qwen3-14B"}


def target_of(alternative: float, bound: float) -> tuple[float, str]:
    """Issue #23's target (req/s) and which rule set it: 1.2x the alternative, else 90% of the
    bound where that is lower, but never under the alternative itself."""
    ratio, share = TARGET_RATIO * alternative, TARGET_BOUND_SHARE * bound
    if ratio <= share:
        return ratio, "1.2x alternative"
    if share >= alternative:
        return share, "90% of bound"
    return alternative, "the alternative"


def lower_run(best: dict[str, Any]) -> float:
    """The lower of a best setting's two run lengths (req/s): its figure, or its 2x run's where
    that is lower at all. The figure takes the 2x run only past a 5% fall, and the two searches
    step 2.5% each, so equal true drifts can land either side of 5%; the lower of the two is the
    same conservative rule for every policy (a best setting without a 2x run keeps its figure)."""
    rl = best.get("run_length")
    cap = float(best["capacity_qps"])
    return min(cap, float(rl["capacity_qps"])) if rl else cap


def _router(cluster: Cluster, policy: str, best: dict[str, Any]) -> str:
    """The router a best setting ran behind, resolved (the system's own where not tuned)."""
    s = Setting(policy, tuple(sorted(best["setting"].items())))
    return POLICIES[policy].router_for(cluster.sim_config(s, 1.0, 1000))


def _case(path: str) -> dict[str, Any]:
    with open(path) as f:
        result = json.load(f)
    cl = result["config"]["cluster"]
    cluster = Cluster(**cl)
    cfg = cluster.sim_config(Setting("duet"), 1.0, 1000)  # the sweep's overrides included
    bound = physical_bound(cfg)
    queue = checked_queue_bound(cfg, int(result["config"]["requests"]), cluster.target,
                                BEST_ORDERS)
    pols = result["policies"]
    best = {p: float(r["best"]["capacity_qps"]) for p, r in pols.items()}
    rows = alternatives(pols)  # reference rows (<policy>+hrrn, after SGLang 0.5.17) included
    alts = {name: float(e["capacity_qps"]) for name, (_, e) in rows.items()}
    alt = max(alts, key=lambda p: alts[p])
    duet, b = best["duet"], bound["capacity_qps"]
    qb = min(b, queue["queue_qps"])  # the queue-aware figure: the lower of the two
    target, kind = target_of(alts[alt], b)
    low = {"duet": lower_run(pols["duet"]["best"]),
           **{name: lower_run(e) for name, (_, e) in rows.items()}}
    low_alt = max((p for p in low if p != "duet"), key=lambda p: low[p])
    released = max((p for p in alts if p in pols), key=lambda p: alts[p])
    ob = min(b, max(queue["queue_qps"], queue["queue_best_qps"]))  # the best order's
    return {
        "file": os.path.basename(path),
        "trace": cl["trace"], "model": cl["model"], "tp": cl["tp"], "gpus": cl["gpus"],
        "hardware": cl["hardware"], "commit": result["stamp"]["commit"],
        "duet": duet, "duet_default": float(pols["duet"]["default"]["capacity_qps"]),
        "duet_paper": best.get("duet-paper"),
        "best_alternative": alt, "best_alternative_qps": alts[alt],
        "best_alternative_setting": rows[alt][1]["label"],
        # a reference row's name as the tables give it (`report.shown`), where it differs
        **({"best_alternative_shown": shown(alt)} if shown(alt) != alt else {}),
        "routers": {"duet": _router(cluster, "duet", pols["duet"]["best"]),
                    alt: _router(cluster, rows[alt][0], rows[alt][1])},
        "alternatives": alts,
        # the alternatives that are reference rows (SGLang after 0.5.17), where there are any
        **({"references": refs} if (refs := {name: shown(name) for name in rows
                                             if name not in pols}) else {}),
        "vs_best_alternative": round(duet / alts[alt], 3),
        "lower_run": {"duet": low["duet"], "best_alternative": low_alt,
                      "best_alternative_qps": low[low_alt],
                      "vs_best_alternative": round(low["duet"] / low[low_alt], 3)},
        "bound_qps": b, "bound_mixture": bound["mixture"], "serial_bound_qps": bound["serial_qps"],
        "compute_floor_qps": bound["compute_floor_qps"],
        "duet_share_of_bound": round(duet / b, 3),
        # the bound under the TTFT SLO too (queue_bound.py)
        "queue_qps": queue["queue_qps"], "queue_ceiling_qps": queue["queue_ceiling_qps"],
        "queue_requests": queue["requests"], "queue_aware_bound_qps": qb,
        "duet_share_of_queue_bound": round(duet / qb, 3),
        # the same ideal server admitting in the best predictive order (queue_bound.py)
        "queue_best_qps": queue["queue_best_qps"], "queue_best_order": queue["queue_best_order"],
        "order_aware_bound_qps": ob, "duet_share_of_order_bound": round(duet / ob, 3),
        "alternative_share_of_order_bound": round(alts[alt] / ob, 3),
        # the best alternative a user can run today (SGLang 0.5.17, no reference row)
        "best_released_alternative": released,
        "best_released_alternative_qps": alts[released],
        "vs_best_released_alternative": round(duet / alts[released], 3),
        # fairness at each one's capacity (sim.steady; issue #48: no win by parking prompts)
        "fairness": {"duet": fairness(pols["duet"]["best"]), alt: fairness(rows[alt][1]),
                     **({released: fairness(rows[released][1])} if released != alt else {})},
        "alternative_share_of_queue_bound": round(alts[alt] / qb, 3),
        "alternative_share_of_bound": round(alts[alt] / b, 3),
        "target_qps": round(target, 4),
        "target_kind": kind,
        "target_met": duet >= target, "not_below_alternative": duet >= alts[alt],
    }


def fairness(entry: dict[str, Any]) -> dict[str, Any] | None:
    """P99 and max TTFT (s) and the longest-prompt tenth's TTFT attainment of a best setting's
    run at its capacity (None for a run made before `sim.steady` kept them)."""
    st = ((entry.get("at_capacity") or {}).get("steady")) or {}
    if "ttft_max_s" not in st:
        return None
    return {k: st[k] for k in ("ttft_p99_s", "ttft_max_s", "long_tenth_attainment")}


CAUSE_NAMES = {"ttft": "TTFT", "tbt_server": "TBT", "tbt_client": "delivered TBT",
               "both": "TTFT and TBT", "unserved": "unserved"}


def limit_of(point: dict[str, Any], target: float = TARGET_BOUND_SHARE) -> str:
    """What stops a run just past capacity (a `misses` point): its largest miss cause and its
    share of the window, and "falls behind" when admissions do not keep pace (`sim.steady`)."""
    c = point["causes"]
    top = max(CAUSE_NAMES, key=lambda k: c[k])
    share = c[top] / c["window"]
    miss = f"{CAUSE_NAMES[top]} {share:.0%}" if share >= 0.01 else f"{CAUSE_NAMES[top]} <1%"
    miss = miss if c[top] else ""
    if point["attainment"] >= target:
        return "falls behind" + (f" ({miss})" if miss else "") if not point["keeps_up"] else miss
    return miss + ("" if point["keeps_up"] else ", falls behind")


def summarize(out_dir: str) -> dict[str, Any]:
    """The cases of every ``<trace>-<model>-tp<tp>.json`` in ``out_dir`` (sorted by model, then
    the traces' order in the file names); with ``misses.json`` there (`misses.py`), what stops
    duet just past its capacity (``duet_limit``)."""
    paths = sorted(glob.glob(os.path.join(out_dir, "*-tp[0-9]*.json")))
    cases = [_case(p) for p in paths]
    cases.sort(key=lambda c: (c["tp"], c["model"], c["trace"]))
    misses = os.path.join(out_dir, "misses.json")
    if os.path.exists(misses):
        with open(misses) as f:
            got = json.load(f)["cases"]
        for c in cases:
            row = got.get(c["file"][:-len(".json")], {}).get("duet")
            if row and row["points"]:
                c["duet_limit"] = limit_of(max(row["points"], key=lambda p: p["qps"]))
    return {"cases": cases, "changing": changing(out_dir)}


def _label(c: dict[str, Any]) -> str:
    model = MODELS.get(c["model"], c["model"]) + (f" TP={c['tp']}" if c["tp"] > 1 else "")
    return f"{c['trace']}, {model}"


def _q(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}" if v < 10 else f"{v:.1f}"


def _shown(c: dict[str, Any]) -> str:
    """The best alternative's name as the tables give it (a reference row says it needs SGLang
    after 0.5.17; summaries written before reference rows existed carry no such name)."""
    return c.get("best_alternative_shown") or c["best_alternative"]


def _lower(low: dict[str, Any] | None) -> str:
    if not low:
        return "-"
    return (f"{_q(low['duet'])} vs {shown(low['best_alternative'])} "
            f"{_q(low['best_alternative_qps'])}: "
            f"{low['vs_best_alternative']:.2f}x")


def _queue(c: dict[str, Any]) -> str:
    if "queue_qps" not in c:
        return "-"
    return (f"{_q(c['queue_aware_bound_qps'])}: {c['duet_share_of_queue_bound']:.0%}, "
            f"{c['alternative_share_of_queue_bound']:.0%}")


def table(summary: dict[str, Any]) -> str:
    """The full markdown table of `summary` (docs/capacity.md's, verbatim)."""
    lines = ["| case (2x H100) | duet | duet-paper | best-tuned alternative | duet / it | "
             "lower of 1x, 2x runs | physical bound | duet / bound | alternative / bound | "
             "queue-aware bound: duet, alternative / it | "
             "compute floor | target | met | what stops duet past it |",
             "| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: "
             "| --- | --- |"]
    for c in summary["cases"]:
        met = "yes" if c["target_met"] else "no" + ("" if c["not_below_alternative"]
                                                   else " (below it)")
        lines.append(
            f"| {_label(c)} | {_q(c['duet'])} | {_q(c['duet_paper'])} | "
            f"{_shown(c)} {_q(c['best_alternative_qps'])} "
            f"({c['best_alternative_setting']}) | {c['vs_best_alternative']:.2f}x | "
            f"{_lower(c.get('lower_run'))} | "
            f"{_q(c['bound_qps'])} | {c['duet_share_of_bound']:.0%} | "
            f"{c['alternative_share_of_bound']:.0%} | {_queue(c)} | "
            f"{_q(c['compute_floor_qps'])} | "
            f"{_q(c['target_qps'])} "
            f"({c['target_kind']}) | {met} | {c.get('duet_limit') or '-'} |")
    return "\n".join(lines)


def _fair(f: dict[str, Any] | None) -> str:
    if not f:
        return "-"
    return (f"{f['ttft_p99_s']:.3g} / {f['ttft_max_s']:.3g} s, "
            f"{f['long_tenth_attainment']:.0%}")


def fairness_table(summary: dict[str, Any]) -> str:
    """Each case's fairness at capacity: duet's, the best alternative's and, where that is a
    reference row, the best released one's; and the order-aware bound."""
    lines = ["| case (2x H100) | duet: P99 / max TTFT, longest tenth in SLO | best alternative: "
             "the same | best released alternative (SGLang 0.5.17): capacity, duet / it, the "
             "same | order-aware bound: best order, duet, alternative / it |",
             "| --- | --- | --- | --- | --- |"]
    for c in summary["cases"]:
        if "fairness" not in c:
            continue
        fair, rel = c["fairness"], c["best_released_alternative"]
        lines.append(
            f"| {_label(c)} | {_fair(fair['duet'])} | {_shown(c)}: "
            f"{_fair(fair[c['best_alternative']])} | {rel} {_q(c['best_released_alternative_qps'])}"
            f", {c['vs_best_released_alternative']:.2f}x, {_fair(fair.get(rel))} | "
            f"{_q(c['order_aware_bound_qps'])} ({c['queue_best_order']}): "
            f"{c['duet_share_of_order_bound']:.0%}, {c['alternative_share_of_order_bound']:.0%} |")
    return "\n".join(lines)


def short_table(summary: dict[str, Any]) -> str:
    """One row per case for the README: duet, the best-tuned alternative with its setting, the
    ratio and each one's share of the physical bound (the full table: `table`)."""
    lines = ["| case (2x H100) | duet (req/s) | best-tuned alternative (its setting) | "
             "duet / alternative | share of the bound: duet, alternative |",
             "| --- | ---: | --- | ---: | ---: |"]
    for c in summary["cases"]:
        lines.append(
            f"| {_label(c)} | {_q(c['duet'])} | {_shown(c)} "
            f"{_q(c['best_alternative_qps'])} ({c['best_alternative_setting']}) | "
            f"{c['vs_best_alternative']:.2f}x | {c['duet_share_of_bound']:.0%}, "
            f"{c['alternative_share_of_bound']:.0%} |")
    return "\n".join(lines)


CHANGE_BEGIN = "<!-- changing-table: python -m benchmark.capacity.summary -->"
CHANGE_END = "<!-- /changing-table -->"


def changing(out_dir: str) -> list[dict[str, Any]]:
    """One row per changing-traffic workload in ``out_dir/changing`` (`changing.py`): duet at
    its defaults against the best alternative tuned once, and that one's oracle per phase
    (load scales: multiples of the workload's whole rate profile)."""
    rows = []
    for path in sorted(glob.glob(os.path.join(out_dir, "changing", "*.json"))):
        with open(path) as f:
            body = json.load(f)
        systems = body["systems"]
        alts = {p: r for p, r in systems.items() if p != "duet" and r.get("tuned_once")}
        alt = max(alts, key=lambda p: alts[p]["tuned_once"]["capacity_scale"] or 0.0)
        duet = systems["duet"]["default"]
        a, orc = alts[alt]["tuned_once"], alts[alt].get("oracle") or {}
        rows.append({
            "workload": body["config"]["workload"]["name"], "commit": body["stamp"]["commit"],
            "duet_scale": duet["capacity_scale"], "duet_rps": duet["offered_rps"],
            "best_alternative": alt, "best_alternative_scale": a["capacity_scale"],
            "best_alternative_setting": a["label"],
            "vs_best_alternative": round(duet["capacity_scale"] / a["capacity_scale"], 3),
            "best_alternative_oracle_scale": orc.get("capacity_scale"),
            "vs_best_alternative_oracle": round(duet["capacity_scale"] / orc["capacity_scale"],
                                                3) if orc.get("capacity_scale") else None})
    return rows


def changing_table(rows: list[dict[str, Any]]) -> str:
    """The README's changing-traffic rows (`changing`)."""
    lines = ["| workload (2x H100, Qwen3-8B) | duet at defaults: load scale (req/s) | best "
             "alternative tuned once (its setting) | duet / it | its oracle per phase, duet / "
             "it |", "| --- | ---: | --- | ---: | ---: |"]
    for r in rows:
        orc = r["best_alternative_oracle_scale"]
        lines.append(
            f"| {r['workload']} | {r['duet_scale']:#.3g} ({r['duet_rps']:#.3g}) | "
            f"{r['best_alternative']} {r['best_alternative_scale']:#.3g} "
            f"({r['best_alternative_setting']}) | {r['vs_best_alternative']:.2f}x | "
            + (f"{orc:#.3g}, {r['vs_best_alternative_oracle']:.2f}x |" if orc else "- |"))
    return "\n".join(lines)


def readme_block(summary: dict[str, Any]) -> str:
    return f"{MARK_BEGIN}\n{short_table(summary)}\n{MARK_END}"


def doc_block(summary: dict[str, Any]) -> str:
    return f"{DOC_BEGIN}\n{table(summary)}\n\n{fairness_table(summary)}\n{DOC_END}"


def write_block(path: str, block: str) -> None:
    """Replace the block between `block`'s first and last lines (its markers) in `path`."""
    begin, end = block.split("\n")[0], block.split("\n")[-1]
    with open(path) as f:
        text = f.read()
    pattern = re.escape(begin) + r".*?" + re.escape(end)
    if not re.search(pattern, text, flags=re.S):
        raise ValueError(f"{path}: no {begin!r} ... {end!r} block")
    text = re.sub(pattern, lambda _: block, text, count=1, flags=re.S)
    with open(path, "w") as f:
        f.write(text)


def write_readme(summary: dict[str, Any], path: str) -> None:
    write_block(path, readme_block(summary))
    if summary.get("changing"):
        write_block(path, f"{CHANGE_BEGIN}\n{changing_table(summary['changing'])}\n{CHANGE_END}")


def plot(summary: dict[str, Any], path: str) -> None:
    """Bars per case: duet, the best-tuned alternative and the physical bound (req/s, each
    case scaled to its bound so that mooncake's ~2 req/s and azure's ~40 share one axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = summary["cases"]
    fig, ax = plt.subplots(figsize=(9, 3.6), dpi=100)
    w = 0.38
    for i, c in enumerate(cases):
        b = c["bound_qps"]
        for j, (v, colour, name) in enumerate(((c["duet"], "tab:red", "sglang-duet"), (
                c["best_alternative_qps"], "tab:blue", "best-tuned alternative"))):
            x = i + (j - 0.5) * w
            ax.bar(x, v / b, w, color=colour, label=name if i == 0 else None)
            ax.text(x, v / b + 0.01, _q(v), ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="black", lw=1, ls="--", label="physical bound")
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([_label(c).replace(", ", "\n") + f"\nbound {_q(c['bound_qps'])}"
                        for c in cases], fontsize=8)
    ax.set_ylim(0, 1.25)
    ax.set_ylabel("capacity / physical bound")
    ax.set_title("Capacity at both SLOs, 2x H100 (simulated; bar labels in req/s)", fontsize=10)
    ax.legend(fontsize=8, loc="upper center", ncol=3, framealpha=0.9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmark.capacity.summary",
                                 description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--dir", default=str(ROOT / "benchmark" / "results" / "capacity"))
    ap.add_argument("--readme", default=str(ROOT / "README.md"),
                    help="README to rewrite between the markers ('' for none)")
    ap.add_argument("--doc", default=str(ROOT / "docs" / "capacity.md"),
                    help="document to rewrite between the full table's markers ('' for none)")
    args = ap.parse_args(argv)
    summary = summarize(args.dir)
    if not summary["cases"]:
        print(f"benchmark.capacity.summary: error: no sweep results in {args.dir}",
              file=sys.stderr)
        return 2
    write_result(os.path.join(args.dir, "summary.json"), summary,
                 argv=["benchmark.capacity.summary"])
    write_index(args.dir)
    plot(summary, os.path.join(args.dir, "summary.png"))
    if args.readme:
        write_readme(summary, args.readme)
    if args.doc:
        write_block(args.doc, doc_block(summary))
    print(table(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
