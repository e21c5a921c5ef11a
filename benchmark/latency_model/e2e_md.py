"""Markdown of ``benchmark.latency_model.e2e_report`` (tables only; the numbers are the JSON's)."""

from __future__ import annotations

from typing import Any

SHORT = {"throughput_rps": "req/s", "ttft_mean_ms": "TTFT mean", "ttft_median_ms": "TTFT p50",
         "tpot_mean_ms": "TPOT mean", "tpot_median_ms": "TPOT p50", "itl_mean_ms": "ITL mean",
         "itl_median_ms": "ITL p50"}
ABL = ("frontend", "prefix_cache", "running_caps", "sglang_schedule", "calibration")


def _r(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _v(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" if abs(x) < 100 else f"{x:,.0f}"


def _summary(res: dict[str, Any]) -> list[str]:
    lines = ["| metric | target | before: within / n (geomean) | after: within / n (geomean) |",
             "|---|---|---|---|"]
    for kind, a in res["summary_after"].items():
        b = res["summary_before"][kind]
        lines.append(f"| {kind} | {a['target'][0]}-{a['target'][1]}x | {b['within']} / {b['n']}"
                     f" ({_r(b['geomean_ratio'])}) | {a['within']} / {a['n']} "
                     f"({_r(a['geomean_ratio'])}) |")
    return lines


def _rows(res: dict[str, Any]) -> list[str]:
    lines = ["| case | engine | GPU x n | metric | published | before | after | "
             + " | ".join(f"w/o {a}" for a in ABL) + " |", "|---" * (7 + len(ABL)) + "|"]
    for r in res["rows"]:
        first = True
        for m in r["comparable"]:
            head = m in r["headline"]
            cells = [f"**{_r(r['ratio_after'][m])}**" if head else _r(r["ratio_after"][m])]
            cells += [_r(r["ratio_without"][a][m]) for a in ABL]
            lead = (f"| {r['id']} | {r['engine']} | {r['gpu']} x {r['gpus']} |" if first
                    else "| | | |")
            lines.append(f"{lead} {SHORT[m]} | {_v(r['published'][m])} | "
                         f"{_r(r['ratio_before'][m])} | " + " | ".join(cells) + " |")
            first = False
    return lines


def _checks(res: dict[str, Any]) -> list[str]:
    ch = res["checks"]
    lines = ["| check | paper | before | after |", "|---|---|---|---|"]
    for name, a in ch["after"]["latency_model"].items():
        b = ch["before"]["latency_model"][name]
        if a["holds"] is None:
            continue
        lines.append(f"| {name} | {a['paper']} | {b['model']} ({'holds' if b['holds'] else 'NO'})"
                     f" | {a['model']} ({'holds' if a['holds'] else 'NO'}) |")
    ob, oa = ch["before"]["obs3"], ch["after"]["obs3"]
    lines.append(f"| Obs. 3: Disagg 1P1D / Agg-vLLM tokens/s at QPS "
                 f"{oa['points'][-1]['qps']} (8000/200, 2 x H100) | < 0.5 | "
                 f"{_r(ob['ratio_at_max_qps'])} ({'holds' if ob['holds'] else 'NO'}) | "
                 f"{_r(oa['ratio_at_max_qps'])} ({'holds' if oa['holds'] else 'NO'}) |")
    lines.append(f"| Obs. 3: Agg-vLLM saturates (served < 0.97 x offered) | near QPS 7 | "
                 f"QPS {ob['agg_saturates_at_qps']} | QPS {oa['agg_saturates_at_qps']} |")
    ab, aa = ch["before"]["azure_code_qps16"], ch["after"]["azure_code_qps16"]
    lines.append(f"| Azure-Code QPS 16, SGLang-Default P99 TBT (ms) | > 680, unbounded | "
                 f"{_v(ab['sglang-default']['tbt_p99_ms'])} | "
                 f"{_v(aa['sglang-default']['tbt_p99_ms'])} |")
    lines.append(f"| Azure-Code QPS 16, DuetServe P99 TBT (ms) | < 150 | "
                 f"{_v(ab['duet']['tbt_p99_ms'])} | {_v(aa['duet']['tbt_p99_ms'])} |")
    return lines


def markdown(res: dict[str, Any]) -> str:
    fit = res["frontend_fit_all_rows"]
    lines = [
        "# The simulator end to end against published serving runs", "",
        f"`python -m benchmark.latency_model.e2e_report` on `{res['csv']}` ({res['n_cases']} "
        f"runs; {res['kfold']}-fold held out{'; QUICK run' if res['quick'] else ''}). Ratios "
        "are simulated / published. **before**: the simulator without the end-to-end costs, on "
        "the calibration before the H100 prefill rows; **after**: every cost on, front-end cost "
        "fitted on the other folds (held out); **w/o X**: after with X off (front-end cost "
        "fitted on all rows; 'calibration' = the old calibration). Bold: the metric the target "
        "names (mean where published, else median).", "", "## Summary (headline metrics)", "",
        *_summary(res), "", "## Per run", "", *_rows(res), "",
        "## Front-end cost fitted on all rows (sim/frontend_costs.json)", "",
        "| system | intake per request (ms) | streaming per token (ms) | delivery latency (ms) "
        "| rows |", "|---|---|---|---|---|"]
    for s, (a, p, b) in fit.items():
        rows = ", ".join(res["frontend_provenance"]["rows"][s])
        lines.append(f"| {s} | {a * 1e3:g} | {p * 1e3:g} | {b * 1e3:g} | {rows} |")
    lines += ["", "## Misses after (headline metrics outside the target)", ""]
    for s in res["summary_after"].values():
        for m in s["misses"]:
            lines.append(f"- {m['id']} {SHORT[m['metric']]}: {m['ratio']:.2f}x "
                         f"(target {s['target'][0]}-{s['target'][1]}x)")
    lines += ["", "## The paper's own figures", "", *_checks(res), "",
              "Why the misses remain: `benchmark/latency_model/e2e/README.md`.", ""]
    return "\n".join(lines)
