"""Comparison table (Markdown) and PNG plots of TTFT, TBT and throughput vs QPS."""

from __future__ import annotations

import os

COLUMNS = [
    ("system", "system", None), ("qps", "QPS", None), ("done", "done", None),
    ("output_throughput", "out tok/s", 1), ("request_throughput", "req/s", 2),
    ("median_ttft_ms", "TTFT p50 ms", 1), ("p99_ttft_ms", "TTFT p99 ms", 1),
    ("median_itl_ms", "TBT p50 ms", 1), ("p99_itl_ms", "TBT p99 ms", 1),
    ("max_itl_ms", "TBT max ms", 1), ("slo_attainment", "SLO att.", 2),
]


def _fmt(v, digits: int | None) -> str:
    if v is None:
        return "-"
    if digits is None or not isinstance(v, (int, float)):
        return str(v)
    return f"{v:.{digits}f}"


def table(results: dict) -> str:
    """Markdown table: one row per (system, QPS) run, then one line per skipped/failed system."""
    lines = ["| " + " | ".join(c[1] for c in COLUMNS) + " |",
             "|" + "|".join("---" if i < 2 else "---:" for i in range(len(COLUMNS))) + "|"]
    notes = []
    for name, entry in results["systems"].items():
        if entry["status"] != "ran":
            notes.append(f"* {name}: {entry['status']} — {entry['reason']}")
        for run in entry.get("runs", []):
            s = dict(run["summary"] or {}, system=name, qps=run["qps"])
            s["done"] = f"{s.get('completed') or 0}/{s.get('requests', '?')}" if run[
                "summary"] else f"error: {run.get('error', '?')}"
            lines.append("| " + " | ".join(_fmt(s.get(k), d) for k, _, d in COLUMNS) + " |")
    slo = results["config"]
    notes.append(f"* SLO attainment: TTFT <= {slo['ttft_slo_ms']:g} ms and every inter-token gap "
                 f"<= {slo['tbt_slo_ms']:g} ms (failed requests count as misses).")
    return "\n".join(lines + [""] + notes) + "\n"


def plots(results: dict, out_prefix: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs = [
        ("ttft", "TTFT (ms)", [("median_ttft_ms", "p50", "-"), ("p99_ttft_ms", "p99", "--")]),
        ("tbt", "TBT / ITL (ms)", [("median_itl_ms", "p50", "-"), ("p99_itl_ms", "p99", "--")]),
        ("throughput", "output tokens/s", [("output_throughput", "", "-")]),
    ]
    paths = []
    for key, ylabel, series in figs:
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        for idx, (name, entry) in enumerate(results["systems"].items()):
            runs = [r for r in entry.get("runs", []) if r["summary"]]
            if not runs:
                continue
            qps = [r["qps"] for r in runs]
            for metric, label, style in series:
                ax.plot(qps, [r["summary"][metric] for r in runs], style, marker="o",
                        color=f"C{idx}", label=f"{name} {label}".strip())
        ax.set_xlabel("offered load (requests/s)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{results['config']['trace']} — {ylabel}")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
        path = f"{out_prefix}_{key}.png"
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
