"""The capacity sweep's plot (attainment vs QPS, one line per policy, the target drawn) and its
markdown table (capacity per policy, duet's ratios against the baselines, gap causes)."""

from __future__ import annotations

import os
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"duet": "tab:red", "duet-paper": "salmon", "vllm-chunked": "tab:blue",
          "sglang-chunked": "tab:cyan", "sglang-default": "tab:gray",
          "sglang-pdmux": "tab:purple", "dynamo": "tab:orange"}
AGGREGATED = ("vllm-chunked", "sglang-chunked", "sglang-default")
DISAGG_LIKE = ("sglang-pdmux", "dynamo")


def stem(cfg: dict[str, Any]) -> str:
    """File stem of one sweep: trace, model, TP (and any simulator overrides)."""
    base = f"{os.path.basename(cfg['trace']).split('.')[0]}-{cfg['model']}-tp{cfg['tp']}"
    extra = "".join(f"-{k}{v:g}" if isinstance(v, float) else f"-{k}{v}"
                    for k, v in sorted((cfg.get("sim_overrides") or {}).items()))
    return base + extra


def title(cfg: dict[str, Any]) -> str:
    over = ", ".join(f"{k}={v}" for k, v in sorted((cfg.get("sim_overrides") or {}).items()))
    return (f"{cfg['trace']} ({cfg['requests']} req), {cfg['model']} TP={cfg['tp']} on "
            f"{cfg['gpus']}x {cfg['hardware']}, tau={cfg['tbt_slo_ms']:g} ms, "
            f"TTFT SLO {cfg['ttft_slo_ms'] / 1e3:g} s" + (f", {over}" if over else ""))


def plot(result: dict[str, Any], path: str) -> None:
    cfg = result["config"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for pol, r in result["policies"].items():
        q = [p["qps"] for p in r["points"]]
        a = [p["slo_both_attainment"] for p in r["points"]]
        ax.plot(q, a, marker="o", ms=3, label=f"{pol} (cap. {_cap(r)})",
                color=COLORS.get(pol))
    ax.axhline(cfg["target"], color="k", ls="--", lw=0.8, label=f"{cfg['target']:.0%} target")
    ax.set_xlabel("Poisson QPS (req/s)")
    ax.set_ylabel("requests meeting both SLOs")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title(title(cfg), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cap(r: dict[str, Any]) -> str:
    return f">= {r['capacity_qps']:g}" if r["above_grid"] else f"{r['capacity_qps']:g}"


def ratios(result: dict[str, Any], ours: str = "duet") -> dict[str, float | None]:
    """duet's capacity over the better of pdmux/dynamo and over the best aggregated baseline."""
    pols = result["policies"]
    if ours not in pols:
        return {}
    c = pols[ours]["capacity_qps"]

    def best(names: tuple[str, ...]) -> float | None:
        caps = [pols[n]["capacity_qps"] for n in names if n in pols]
        return max(caps) if caps else None

    out: dict[str, float | None] = {}
    for key, names in (("vs_disagg_like", DISAGG_LIKE), ("vs_aggregated", AGGREGATED)):
        b = best(names)
        out[key] = round(c / b, 3) if b else None
    return out


def _gap_cell(m: dict[str, Any] | None) -> str:
    causes = (m or {}).get("gap_causes") or {}
    shown = [f"{k} {v}" for k, v in causes.items() if v]
    return ", ".join(shown) if shown else "-"


def markdown(result: dict[str, Any]) -> str:
    cfg = result["config"]
    lines = [f"### {title(cfg)}", "",
             "Capacity = highest Poisson QPS with >= "
             f"{cfg['target']:.0%} of requests meeting both SLOs (bisection, "
             f"{cfg['bisect_steps']} steps, between grid points {list(cfg['grid'])}). "
             "At capacity: P99 TBT over all gaps, P99 TTFT, and the gaps over tau by cause.", "",
             "| policy | capacity (req/s) | attainment | P99 TBT (ms) | P99 TTFT (ms) | "
             "gaps > tau by cause |",
             "| --- | ---: | ---: | ---: | ---: | --- |"]
    for pol, r in result["policies"].items():
        m = r["at_capacity"] or {}
        att = m.get("slo_both_attainment")
        lines.append(f"| {pol} | {_cap(r)} | {'-' if att is None else f'{att:.3f}'} | "
                     f"{_num(m.get('tbt_p99_ms'))} | {_num(m.get('ttft_p99_ms'), 0)} | "
                     f"{_gap_cell(m)} |")
    rt = ratios(result)
    if rt:
        lines += ["", f"duet / better of sglang-pdmux, dynamo: {_num(rt['vs_disagg_like'], 2)}"
                  f"x (target 1.2x); duet / best aggregated: {_num(rt['vs_aggregated'], 2)}x "
                  "(target 1.5x)."]
    lines += ["", f"Sweep wall time: {result['wall_s']} s.", ""]
    return "\n".join(lines)


def _num(v: float | None, nd: int = 1) -> str:
    return "-" if v is None else f"{v:,.{nd}f}"


def write(result: dict[str, Any], out_dir: str) -> tuple[str, str]:
    """Write ``<stem>.png`` and ``<stem>.md``; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, stem(result["config"]))
    plot(result, base + ".png")
    with open(base + ".md", "w") as f:
        f.write(markdown(result))
    return base + ".png", base + ".md"
