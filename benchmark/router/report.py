"""The markdown summary of the router results: capacity per router, the duet router's ratio to
the best of SGLang's own methods (round-robin, total-requests, total-tokens), and the dispatch
cost."""

from __future__ import annotations

import glob
import json
import os

__all__ = ["write_markdown"]

SGLANG_METHODS = ("round-robin", "total-requests", "total-tokens")


def _cell(row: dict) -> str:
    """A router's capacity; where the run-length check set it, "(2x run; 1x: <the one-length
    figure>)"."""
    if row.get("capacity_from"):
        return f"{row['capacity_qps']:.3f} (2x run; 1x: {row['short_run_qps']:.3f})"
    return f"{row['capacity_qps']:.3f}"


def _one_length(row: dict) -> float:
    """The capacity found at the run length every router and alternative gets (the figure
    before any 2x-run check), so that ratios compare runs of one length."""
    return row.get("short_run_qps", row["capacity_qps"])


def _capacity_rows(data: dict) -> list[str]:
    rows = []
    for trace, by_router in data["traces"].items():
        caps = {r: _one_length(v) for r, v in by_router.items()}
        sg = [caps[r] for r in SGLANG_METHODS if r in caps]
        best = max(sg) if sg else None
        ratio = f"{caps['duet'] / best:.3f}" if best and "duet" in caps else "-"
        cells = " | ".join(_cell(by_router[r]) if r in caps else "-" for r in _ORDER)
        base = (data.get("baselines") or {}).get(trace, {})
        alt = {p: v["capacity_qps"] for p, v in base.items()}
        alt_cells = " | ".join(
            f"{base[p]['capacity_qps']:.3f} ({base[p]['setting']})" if p in base else "-"
            for p in ("sglang-chunked", "dynamo"))
        best_alt = max(alt.values()) if alt else None
        duet = max(caps.values()) if caps else None
        vs = f"{duet / best_alt:.3f}" if best_alt and duet else "-"
        commit = (data.get("stamp") or {}).get("commit", "-")
        if data.get("baselines_from") and base:
            commit += f" (alternatives: {data['baselines_from']})"
        rows.append(f"| {data['setup']['name']} | {trace} | {cells} | {ratio} | {alt_cells} | "
                    f"{vs} | {commit} |")
    return rows


_ORDER = ("duet", "round-robin", "total-requests", "total-tokens", "least-tokens")


def write_markdown(out_dir: str) -> str:
    lines = ["# Router comparison (simulator)", "",
             "Capacity at steady state: highest Poisson QPS at which the run keeps up (admitted "
             ">= 0.97x offered over the steady-state window, TTFT not rising) and >= 90% of the "
             "window's requests meet both their own P99 TBT <= 100 ms and TTFT <= 10 s "
             "(`benchmark.capacity.search`); replicas run the duet policy. `ratio` = duet "
             "router / best of SGLang's methods (round-robin, total-requests, total-tokens). The "
             "duet router's capacity is also searched with twice the requests; \"(2x run; 1x: "
             "...)\" marks a figure the longer run lowered by more than 5%, with the figure at "
             "the common length. Only the duet router gets that check (the others' figures may "
             "fall as far), so both ratios compare the common-length figures. "
             "Alternatives, each best-tuned (setting named): SGLang mixed chunked prefill "
             "behind round-robin, Dynamo xPyD; `vs best alternative` = the best duet router / "
             "the better of them. Produced by `python -m benchmark.router`; the JSON files next "
             "to this one hold every probe run and the stamp (commit, machine, command); "
             "`commit` is the stamp's. A `-` is a case not run. Earlier figures are in "
             "`before/`, each folder saying why they were replaced.", "",
             "| setup | trace | " + " | ".join(_ORDER) + " | ratio | sglang-chunked | dynamo "
             "| vs best alternative | commit |",
             "|---|---|" + "---|" * (len(_ORDER) + 5)]
    for path in sorted(glob.glob(os.path.join(out_dir, "capacity-*.json"))):
        with open(path) as f:
            data = json.load(f)
        lines += _capacity_rows(data)
    cost_path = os.path.join(out_dir, "dispatch_cost.json")
    if os.path.exists(cost_path):
        with open(cost_path) as f:
            cost = json.load(f)
        lines += ["", "## Dispatch cost (8 replicas x 256 running requests, this CPU)", "",
                  "| router | decision median / p99 (us) | after a report round | "
                  "stream at 200 req/s |", "|---|---|---|---|"]
        for r in cost["results"]:
            d, a, s = r["decision"], r["after_report"], r["stream"]
            lines.append(f"| {r['router']} | {d['median_us']} / {d['p99_us']} | "
                         f"{a['median_us']} / {a['p99_us']} | {s['median_us']} / {s['p99_us']} |")
    text = "\n".join(lines) + "\n"
    path = os.path.join(out_dir, "README.md")
    with open(path, "w") as f:
        f.write(text)
    return path
