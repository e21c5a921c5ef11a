"""Interference of concurrent partitions against published co-location figures.

    python -m benchmark.latency_model.interference [--no-sims] [--out PREFIX]

Fits the coefficients (fit.py), checks them against `sglang_duet.latency.interference.PUBLISHED`,
prints every published point of points.csv next to the model's value for it (compare.py), and the
effect on simulated duet and sglang-pdmux runs (sims.py: azure-code, Qwen3-8B, 2x H100, 1000
requests, with and without interference). Writes PREFIX.json (stamped) and PREFIX.md; default
benchmark/results/latency_model/interference. CPU only, well under a minute.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict

from benchmark.stamp import ROOT, write_result
from sglang_duet.latency import Calibration
from sglang_duet.latency.interference import PUBLISHED
from sglang_duet.sim import SimConfig

from . import sims
from .compare import compare
from .fit import fit as fit_coefficients
from .fit import library_matches_fit, rounded

DEFAULT_OUT = ROOT / "benchmark" / "results" / "latency_model" / "interference"


def _points_md(rows: list[dict]) -> list[str]:
    out = ["| id | GPU | published | use | model | verdict |", "|---|---|---|---|---|---|"]
    for r in rows:
        pub = r["published"]
        try:
            pub = f"{100 * float(pub):.1f}%" if r["relation"] != "value" else pub
        except ValueError:
            pass
        out.append(f"| {r['id']} | {r['gpu']} | {pub} ({r['relation']}) | {r['use']} | "
                   f"{r['model']} | {r['verdict']} |")
    return out


def _sims_md(rows: list[dict]) -> list[str]:
    out = ["| policy | QPS | throughput req/s (none -> published) | SLO attainment | "
           "P99 TBT ms | P99 TTFT ms | mean S_d | spatial share |",
           "|---|---|---|---|---|---|---|---|"]

    def pair(row, key, fmt):
        a, b = row["none"][key], row["published"][key]
        if a is None or b is None:
            return "-"
        return f"{fmt.format(a)} -> {fmt.format(b)}"

    for r in rows:
        out.append(f"| {r['policy']} | {r['qps']:g} | {pair(r, 'throughput_rps', '{:.2f}')} | "
                   f"{pair(r, 'slo_attainment', '{:.3f}')} | {pair(r, 'tbt_p99_ms', '{:.1f}')} | "
                   f"{pair(r, 'ttft_p99_ms', '{:.0f}')} | {pair(r, 'mean_sms_decode', '{:.1f}')} | "
                   f"{pair(r, 'spatial_share', '{:.2f}')} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--no-sims", action="store_true", help="skip the simulated runs")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output prefix (.json, .md)")
    args = ap.parse_args()

    cal_name = SimConfig().calibration
    cal = Calibration.load(cal_name)
    fitted = {hw: asdict(rounded(c)) for hw, c in fit_coefficients(cal).items()}
    drift = library_matches_fit(cal)
    rows, profile = compare(cal)
    sim_rows = [] if args.no_sims else sims.run()

    print(f"fit on calibration {cal_name!r} (library == fit within 2%: {not drift})")
    for hw, c in fitted.items():
        print(f"  {hw}: clock {c['clock']:.4f} decode_memory {c['decode_memory']:.4f} "
              f"decode_max {c['decode_max']:.2f} prefill_bandwidth {c['prefill_bandwidth']:.4f}")
    for line in drift:
        print("  DRIFT", line)
    md = ["# Interference of concurrent partitions against published figures",
          "", "Command: `python -m benchmark.latency_model.interference`. Points: "
          "`benchmark/latency_model/interference/points.csv` (sources in its README). "
          f"Calibration: `{cal_name}`. Model: `sglang_duet/latency/interference.py`.", "",
          "Coefficients (fitted; library `PUBLISHED` equal within 2%: "
          f"{'yes' if not drift else 'NO: ' + '; '.join(drift)}):", "",
          "| GPU | clock | decode_memory | A = clock + decode_memory | M (decode_max) | B |",
          "|---|---|---|---|---|---|"]
    for hw, c in fitted.items():
        md.append(f"| {hw} | {c['clock']:.4f} | {c['decode_memory']:.4f} | "
                  f"{c['clock'] + c['decode_memory']:.4f} | {c['decode_max']:.2f} | "
                  f"{c['prefill_bandwidth']:.4f} |")
    md += ["", "Published point next to the model:", "", *_points_md(rows), "",
           "Largest modelled decode slowdown per decode partition over MuxWise's grid "
           "(its Fig. 11 x-axis; decode SMs "
           + "; ".join(f"{hw}: {', '.join(map(str, s))}" for hw, s in profile["decode_sms"].items())
           + "):", ""]
    for hw, models in profile["decode_slowdown_by_decode_sms"].items():
        for name, vals in models.items():
            md.append(f"- {hw} {name}: " + ", ".join(f"{100 * v:.1f}%" for v in vals))
    if sim_rows:
        md += ["", "Simulated runs (azure-code, Qwen3-8B, 2x h100-sxm, 1000 requests, seed 0; "
               "none -> published):", "", *_sims_md(sim_rows)]
    text = "\n".join(md) + "\n"
    print(text)
    payload = {"calibration": cal_name, "coefficients_fitted": fitted,
               "coefficients_library": {hw: asdict(c) for hw, c in PUBLISHED.items()},
               "library_drift": drift, "points": rows, **profile, "sims": sim_rows}
    write_result(f"{args.out}.json", payload)
    with open(f"{args.out}.md", "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
