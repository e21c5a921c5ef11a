"""The latency model against the published record (issue #17): before and after calibration.

    python -m benchmark.latency_model.published_report [--kfold 6]

Reads ``benchmark/latency_model/published/reference.csv`` (its README says where every row comes
from and how end-to-end figures became iteration times), fits the efficiency factors and the
host-overhead term to the Hopper rows (H100 SXM and H200: the same GH100 silicon) with
`sglang_duet.calibrate.fit`, and scores three models on every row the model can be held to:

* ``roofline``: the model before the host term (every host parameter 0);
* ``uncalibrated``: the default `Calibration` (priors plus the published host defaults);
* ``calibrated``: for a Hopper row, the fit on the other k-1 folds (held out); for any other GPU
  the fit on every Hopper row (a transfer: none of its rows was fitted).

Writes the profile ``python/sglang_duet/latency/calibrations/published-h100.json``,
``benchmark/results/latency_model/published.{json,md}`` and ``published.png`` (predicted
against published). Rows that are bounds, ratios or chunk chains are checked, not scored.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from benchmark.stamp import ROOT, write_result
from sglang_duet.calibrate.fit import calibrate_kfold, kfold_predictions, predict_samples
from sglang_duet.calibrate.published import PublishedRow, chunk_chain, read_published, usable
from sglang_duet.latency import Calibration, LatencyModel, get_hardware
from sglang_duet.latency.calibration import CALIBRATION_DIR

CSV = ROOT / "benchmark" / "latency_model" / "published" / "reference.csv"
OUT = ROOT / "benchmark" / "results" / "latency_model" / "published"
FIT_GPUS = ("h100-sxm", "h200")
PROFILE = "published-h100"
# The set has no decode beyond ~1.5K context (README, gaps): the KV-read efficiency is held at its
# prior instead of being fitted to contexts the rows never reach (fitted, it breaks Fig. 1c). Its
# one Hopper prefill row (sgl-01: 128 x 128 tokens) fixes the GEMM compute efficiency; the
# prefill-attention efficiencies (no long-context Hopper prefill row) and the eager launch cost
# (collinear with GEMM time on one eager row) stay at their priors.
KEEP = ("attn_decode_bw", "launch_layer_s", "attn_prefill_bw", "attn_prefill_compute")
VLLM_H100_CHUNK = 8192  # vLLM EngineArgs.get_batch_defaults: OPENAI_API_SERVER on >= 70 GiB
ROOFLINE = Calibration(name="roofline", iteration_overhead_s=0.0, launch_layer_s=0.0,
                       graph_replay_s=0.0, join_s=0.0)


def score(rows: Sequence[PublishedRow], pred: dict[str, np.ndarray]) -> dict[str, object]:
    """MAPE and worst error per model, overall and per phase and GPU."""
    meas = np.array([r.iteration_ms for r in rows]) / 1e3
    groups = {"all": [True] * len(rows)}
    for key in sorted({r.phase for r in rows}):
        groups[key] = [r.phase == key for r in rows]
    for key in sorted({r.gpu for r in rows}):
        groups[key] = [r.gpu == key for r in rows]
    for key in sorted({(r.phase, r.gpu) for r in rows}):
        groups[f"{key[0]}/{key[1]}"] = [(r.phase, r.gpu) == key for r in rows]
    out: dict[str, object] = {}
    for g, mask in groups.items():
        m = np.array(mask)
        row: dict[str, object] = {"n": int(m.sum())}
        for name, p in pred.items():
            err = np.abs(p[m] - meas[m]) / meas[m]
            worst = int(np.argmax(err))
            row[name] = {"mape": float(err.mean()), "worst": float(err[worst]),
                         "worst_id": [r.id for r, k in zip(rows, m, strict=True) if k][worst]}
        out[g] = row
    return out


def checks(rows: Sequence[PublishedRow], cals: dict[str, Calibration]) -> list[dict[str, object]]:
    """The rows that are not one iteration's value: bounds, the Fig. 1c ratio, a chunk chain."""
    out = []
    by_id = {r.id: r for r in rows}
    for name, cal in cals.items():
        def lm(gpu: str, r: PublishedRow, cal: Calibration = cal) -> LatencyModel:
            return LatencyModel(get_hardware(gpu), r.shape(), cal)

        for rid in ("duet-01",):
            r = by_id[rid]
            t = lm(r.gpu, r).predict(r.batch()).total_s * 1e3
            out.append({"model": name, "id": rid, "claim": f"iteration > {r.iteration_ms:g} ms",
                        "predicted": round(t, 2), "holds": t > r.iteration_ms})
        r = by_id["duet-03"]
        m = lm(r.gpu, r)
        ratio = (m.predict(r.batch()).total_s
                 / m.predict(replace(r, context_tokens=1024).batch()).total_s)
        out.append({"model": name, "id": "duet-03", "claim": "t(8 x 32K) > 4 x t(8 x 1K)",
                    "predicted": round(ratio, 3), "holds": ratio > 4.0})
        long_, short = m.predict(r.batch()), m.predict(replace(r, context_tokens=1024).batch())
        ratio = (long_.total_s - long_.host_s) / (short.total_s - short.host_s)
        out.append({"model": name, "id": "duet-03", "claim": "the same on device time "
                    "(host_s left out: Fig. 1c times the forward pass)",
                    "predicted": round(ratio, 3), "holds": ratio > 4.0})
        r = by_id["gs-11"]
        m = lm(r.gpu, r)
        t = sum(m.predict(b).total_s for b in chunk_chain(r.prefill_tokens, VLLM_H100_CHUNK))
        err = abs(t * 1e3 - r.iteration_ms) / r.iteration_ms
        out.append({"model": name, "id": "gs-11",
                    "claim": f"{r.iteration_ms:g} ms for a 32000-token prompt in "
                             f"{VLLM_H100_CHUNK}-token chunks (upper bound)",
                    "predicted": round(t * 1e3, 1), "holds": t * 1e3 <= r.iteration_ms,
                    "error": round(err, 4)})
    return out


def plot(rows: Sequence[PublishedRow], pred: dict[str, np.ndarray], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    meas = np.array([r.iteration_ms for r in rows])
    fig, ax = plt.subplots(figsize=(6.4, 6.0))
    lo, hi = meas.min() * 0.5, meas.max() * 2.0
    x = np.geomspace(lo, hi, 50)
    ax.plot(x, x, "k-", lw=0.8)
    ax.fill_between(x, x * 0.75, x * 1.25, color="0.9", label="±25%")
    colors = {"roofline": "tab:gray", "uncalibrated": "tab:blue", "calibrated": "tab:red"}
    for name, p in pred.items():
        for phase, marker in (("decode", "o"), ("prefill", "^")):
            m = np.array([r.phase == phase for r in rows])
            if m.any():
                ax.scatter(meas[m], p[m] * 1e3, marker=marker, s=30, color=colors[name],
                           alpha=0.8, label=f"{name} ({phase})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("published iteration time (ms)")
    ax.set_ylabel("predicted (ms)")
    ax.set_title("sglang_duet.latency vs published H100/H200/A100 measurements")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(res: dict[str, object]) -> str:
    lines = ["# The latency model against the published record", "",
             f"Command: `{res['command']}`. Rows: `{res['csv']}` ({res['n_rows']} rows, "
             f"{res['n_scored']} scored). Fitted on {', '.join(FIT_GPUS)} rows; "
             f"{res['kfold']}-fold held out. Profile: `{PROFILE}`; held at the prior: "
             f"{', '.join(KEEP)} (no decode row beyond ~1.5K context).", "",
             "| group | n | roofline MAPE / worst | uncalibrated MAPE / worst | "
             "calibrated (held-out) MAPE / worst |", "|---|---|---|---|---|"]
    for g, row in res["scores"].items():
        cells = [f"{row[m]['mape']:.1%} / {row[m]['worst']:.1%} ({row[m]['worst_id']})"
                 for m in ("roofline", "uncalibrated", "calibrated")]
        lines.append(f"| {g} | {row['n']} | " + " | ".join(cells) + " |")
    lines += ["", "Per row (ms):", "", "| id | GPU | phase | batch | published | roofline | "
              "uncalibrated | calibrated | calibrated error |", "|---" * 9 + "|"]
    for r in res["rows"]:
        lines.append(f"| {r['id']} | {r['gpu']} | {r['phase']} | {r['batch']} | "
                     f"{r['published_ms']:.2f} | {r['roofline_ms']:.2f} | "
                     f"{r['uncalibrated_ms']:.2f} | {r['calibrated_ms']:.2f} | "
                     f"{r['calibrated_error']:.1%}{' (transfer)' if r['transfer'] else ''} |")
    lines += ["", "Checks (rows that are bounds, a ratio or a chunk chain):", "",
              "| model | id | claim | predicted | holds |", "|---|---|---|---|---|"]
    for c in res["checks"]:
        lines.append(f"| {c['model']} | {c['id']} | {c['claim']} | {c['predicted']} | "
                     f"{'yes' if c['holds'] else 'NO'} |")
    lines += ["", "Excluded rows:", ""]
    lines += [f"- {rid}: {why}" for rid, why in res["excluded"].items()]
    lines += ["", "Fitted profile:", "", "```json", res["profile_json"], "```", "",
              f"Simulator default: {res['default_decision']}", "", "Notes:", ""]
    lines += [f"- {n}" for n in notes(res)]
    return "\n".join(lines) + "\n"


def notes(res: dict[str, object]) -> list[str]:
    """What the tables do not say by themselves, with this run's figures."""
    sc, prof = res["scores"], res["profile"]
    rows = {r["id"]: r for r in res["rows"]}
    out = [f"Every calibrated figure on a {'/'.join(FIT_GPUS)} row is held out "
           f"({res['kfold']} folds); rows of other GPUs are predicted by the profile fitted on "
           "all Hopper rows (a transfer, marked so)."]
    if "prefill" in sc:
        pre_gpus = sorted({r["gpu"] for r in res["rows"] if r["phase"] == "prefill"})
        out.append(f"Prefill is scored on {sc['prefill']['n']} row(s), on {', '.join(pre_gpus)}"
                   ": the one Hopper row (sgl-01) sets the GEMM compute efficiency, so its "
                   "held-out figure is the other rows' fit (the prior's GEMM efficiency); long-"
                   "context prefill is checked only (the DuetServe bound, the gs-11 chunk chain, "
                   "below that upper bound).")
    h200 = [r for r in res["rows"] if r["gpu"] == "h200"]
    if h200:
        worst = max(h200, key=lambda r: r["calibrated_error"])
        out.append(f"The model stays up to {worst['calibrated_error']:.0%} below the H200 rows "
                   f"({', '.join(r['id'] for r in h200)}, vLLM offline nightly): their H100/H200 "
                   "ratio "
                   "(bk-03 vs bk-01) is about 1.2 against a 1.43 bandwidth ratio, i.e. more fixed "
                   "per-step time in that engine build than the fitted "
                   f"{prof['iteration_overhead_s'] * 1e3:.2f} ms per pass, which the other, "
                   "server-level rows set.")
    ratio = [c for c in res["checks"] if c["id"] == "duet-03" and c["model"] == "calibrated"]
    if ratio and not all(c["holds"] for c in ratio):
        out.append(f"The profile streams weights at gemm_bw={prof['gemm_bw']:.2f} of peak (the "
                   "server rows cannot tell slow weight reads from per-step time that grows "
                   "with them), so it does not reproduce DuetServe Fig. 1c's > 4x decode "
                   f"slowdown from 1K to 32K context (device-time ratio {ratio[-1]['predicted']})"
                   "; the priors do. No row of the set is a decode beyond ~1.5K context.")
    if rows:
        top = max(rows.values(), key=lambda r: r["calibrated_error"])
        out.append(f"Worst calibrated row: {top['id']} ({top['calibrated_error']:.1%}); the "
                   "target is 10% MAPE per phase and no row above 25%.")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", default=str(CSV))
    ap.add_argument("--kfold", type=int, default=6)
    ap.add_argument("--out", default=str(OUT), help="output path without extension")
    ap.add_argument("--profile-dir", default=str(CALIBRATION_DIR))
    args = ap.parse_args(argv)

    rows = read_published(args.csv)
    scored = usable(rows)
    fit_rows = [r for r in scored if r.gpu in FIT_GPUS]
    other = [r for r in scored if r.gpu not in FIT_GPUS]
    fit_samples = [r.sample() for r in fit_rows]
    result = calibrate_kfold(fit_samples, args.kfold, name=PROFILE, keep=KEEP)
    profile = replace(result.calibration, hardware="+".join(FIT_GPUS))
    profile.save(f"{args.profile_dir}/{PROFILE}.json")

    ordered = fit_rows + other
    samples = fit_samples + [r.sample() for r in other]
    pred = {"roofline": predict_samples(samples, ROOFLINE),
            "uncalibrated": predict_samples(samples, Calibration())}
    held = kfold_predictions(fit_samples, args.kfold, keep=KEEP)
    transfer = predict_samples([r.sample() for r in other], profile) if other else np.empty(0)
    pred["calibrated"] = np.concatenate([held, transfer])
    scores = score(ordered, pred)
    fit_scores = score(fit_rows, {k: v[:len(fit_rows)] for k, v in pred.items()})
    better = all(fit_scores[ph]["calibrated"]["mape"] < fit_scores[ph]["uncalibrated"]["mape"]
                 for ph in {r.phase for r in fit_rows})
    decision = (f"`{PROFILE}` beats the uncalibrated model on held-out {'/'.join(FIT_GPUS)} "
                f"rows in every fitted phase: {better}")
    res = {
        "command": "python -m benchmark.latency_model.published_report",
        "csv": str(CSV.relative_to(ROOT)), "n_rows": len(rows), "n_scored": len(ordered),
        "kfold": args.kfold, "fit_gpus": list(FIT_GPUS), "kept_at_prior": list(KEEP),
        "profile": profile.to_dict(),
        "profile_json": json.dumps({k: v for k, v in profile.to_dict().items()
                                    if k not in ("bw_knee", "bw_hill")}, indent=1),
        "scores": scores, "fit_rows_scores": fit_scores, "calibrated_beats_uncalibrated": better,
        "default_decision": decision,
        "rows": [{"id": r.id, "gpu": r.gpu, "phase": r.phase, "model": r.model,
                  "batch": (f"{r.prefill_tokens}@{r.context_tokens}" if r.phase == "prefill"
                            else f"{r.decode_batch}x1@{r.context_tokens}"),
                  "cpu_share": r.cpu_share(), "published_ms": r.iteration_ms,
                  **{f"{k}_ms": float(v[i] * 1e3) for k, v in pred.items()},
                  "calibrated_error": float(abs(pred["calibrated"][i] * 1e3 - r.iteration_ms)
                                            / r.iteration_ms),
                  "transfer": r.gpu not in FIT_GPUS}
                 for i, r in enumerate(ordered)],
        "checks": checks(rows, {"roofline": ROOFLINE, "uncalibrated": Calibration(),
                                "calibrated": profile}),
        "excluded": {r.id: r.excluded() for r in rows if r.excluded()},
    }
    # "command" is for the markdown; the JSON has it in its stamp
    write_result(f"{args.out}.json", {k: v for k, v in res.items()
                                      if k not in ("profile_json", "command")})
    plot(ordered, pred, f"{args.out}.png")
    with open(f"{args.out}.md", "w", encoding="utf-8") as f:
        f.write(markdown(res))
    for g, row in scores.items():
        print(f"{g:>18} n={row['n']:>2}  " + "  ".join(
            f"{m} {row[m]['mape']:.1%}/{row[m]['worst']:.1%}"
            for m in ("roofline", "uncalibrated", "calibrated")))
    print(decision)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
