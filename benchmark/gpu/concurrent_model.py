"""Pure logic of concurrent_check.py (no torch): shapes, predictions, statistics, the report.

Times are seconds in code; report fields named `*_ms` are milliseconds. A relative error is
``(predicted - measured) / measured``: positive when the latency model over-predicts.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from sglang_duet.latency import Batch, LatencyModel, ModelSpec

PHASES = ("decode_alone", "prefill_alone", "decode_concurrent", "prefill_concurrent")
KNOWN_GPUS = (("H200", "h200"), ("H100", "h100-sxm"), ("A100", "a100-80g"))


@dataclass
class Measured:
    """Timings (seconds) of one menu entry; `sms_decode` None: the whole device, sequential."""

    sms_decode: int | None
    sms_prefill: int | None
    decode_alone: list[float] = field(default_factory=list)
    prefill_alone: list[float] = field(default_factory=list)
    decode_concurrent: list[float] = field(default_factory=list)  # empty when sequential
    prefill_concurrent: list[float] = field(default_factory=list)
    start_skew: list[float] = field(default_factory=list)  # prefill start - decode start
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # the measurement failed (no timings then)


# ---- shapes ----------------------------------------------------------------------------------
def reduced_model(model: ModelSpec, layers: int) -> ModelSpec:
    """`model` with only `layers` decoder layers (LM head and per-layer shapes unchanged)."""
    if not 1 <= layers <= model.num_layers:
        raise ValueError(f"layers must be in 1..{model.num_layers}, got {layers}")
    return replace(model, num_layers=layers, name=f"{model.name}[{layers} layers]")


def workload_batches(
    decode_requests: int, decode_context: int, prefill_tokens: int, prefill_context: int = 0
) -> tuple[Batch, Batch]:
    """(decode, prefill) batches: n decode rows (q=1, c tokens cached) and one prefill chunk."""
    if decode_requests < 1 or decode_context < 0 or prefill_tokens < 1 or prefill_context < 0:
        raise ValueError("decode requests and prefill tokens must be >= 1, contexts >= 0")
    return (Batch.decode(decode_requests, decode_context),
            Batch.prefill(prefill_tokens, prefill_context))


def pick_sizes(available: Sequence[int], total_sms: int, fractions: Sequence[float]
               ) -> list[int]:
    """For each fraction of the device, the nearest decode size the menu offers (ties: the
    smaller); ascending, without repeats."""
    if not available:
        return []
    chosen = set()
    for f in fractions:
        if not 0.0 < f < 1.0:
            raise ValueError(f"fractions must lie in (0, 1), got {f}")
        target = f * total_sms
        chosen.add(min(sorted(available), key=lambda s: abs(s - target)))
    return sorted(chosen)


def parse_list(text: str, kind: type = float) -> list:
    """'0.25, 0.5' -> [0.25, 0.5] (empty items skipped)."""
    return [kind(x) for x in text.split(",") if x.strip()]


def hardware_for(device_name: str, default: str = "h100-sxm") -> tuple[str, str]:
    """Latency-model hardware name for a CUDA device name, and a note when it is a guess."""
    upper = device_name.upper()
    for key, name in KNOWN_GPUS:
        if key in upper:
            return name, ""
    return default, f"unknown GPU {device_name!r}: predicting for {default}"


# ---- statistics ------------------------------------------------------------------------------
def median_s(times: Sequence[float]) -> float | None:
    return float(statistics.median(times)) if times else None


def rel_error(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or measured is None or measured <= 0.0:
        return None
    return (predicted - measured) / measured


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


# ---- predictions -----------------------------------------------------------------------------
def predictions(lm: LatencyModel, decode: Batch, prefill: Batch, sms_decode: int | None,
                sms_prefill: int | None) -> dict[str, float | None]:
    """Predicted seconds of each phase; concurrent ones only for a real split.

    The prefill side is clipped to the SMs the model's hardware has beside the decode side
    (a device with more SMs than the spec would otherwise be refused)."""
    if sms_decode is None:
        return {"decode_alone": lm.predict(decode).total_s,
                "prefill_alone": lm.predict(prefill).total_s,
                "decode_concurrent": None, "prefill_concurrent": None}
    hw = lm.hardware
    sms_d = min(sms_decode, hw.num_sms - hw.sms_per_tpc)
    sms_p = min(sms_prefill or hw.num_sms, hw.num_sms - hw.usable_sms(sms_d))
    d_alone, p_alone = lm.predict(decode, sms_d), lm.predict(prefill, sms_p)
    d_conc, p_conc = lm.predict_concurrent(decode, prefill, sms_d, sms_p)
    return {"decode_alone": d_alone.total_s, "prefill_alone": p_alone.total_s,
            "decode_concurrent": d_conc.total_s, "prefill_concurrent": p_conc.total_s}


def fake_measurements(lm: LatencyModel, decode: Batch, prefill: Batch,
                      splits: Sequence[tuple[int | None, int | None]], repeats: int,
                      bias: float = 1.0) -> list[Measured]:
    """Timings the latency model predicts times `bias`, with +-1% jitter (--dry-run, tests)."""
    out = []
    for sms_d, sms_p in splits:
        pred = predictions(lm, decode, prefill, sms_d, sms_p)
        m = Measured(sms_d, sms_p, notes=["dry run: timings from the latency model"])
        for phase in PHASES:
            if pred[phase] is not None:
                t = pred[phase] * bias
                setattr(m, phase, [t * (1.0 + 0.01 * ((i % 3) - 1)) for i in range(repeats)])
        if sms_d is not None:
            m.start_skew = [0.0] * repeats
        out.append(m)
    return out


# ---- comparison and report -------------------------------------------------------------------
def compare(m: Measured, pred: dict[str, float | None], pred_full: dict[str, float | None]
            ) -> dict:
    """One report row: per phase predicted / measured ms, relative error, samples, and the
    full-model estimate (measured x full / reduced prediction); plus the decode slowdown."""
    row: dict = {"sms_decode": m.sms_decode, "sms_prefill": m.sms_prefill,
                 "concurrent": m.sms_decode is not None and bool(m.decode_concurrent)}
    for phase in PHASES:
        meas = median_s(getattr(m, phase))
        p, pf = pred.get(phase), pred_full.get(phase)
        est = meas * pf / p if meas is not None and p and pf is not None else None
        row[phase] = {
            "pred_ms": _ms(p) if meas is not None else None,
            "meas_ms": _ms(meas),
            "rel_err": rel_error(p, meas),
            "samples_ms": [t * 1e3 for t in getattr(m, phase)],
            "pred_full_model_ms": _ms(pf) if meas is not None else None,
            "meas_full_model_est_ms": _ms(est),
        }
    row["decode_slowdown"] = {
        "pred": _ratio(pred.get("decode_concurrent"), pred.get("decode_alone")),
        "meas": _ratio(median_s(m.decode_concurrent), median_s(m.decode_alone)),
    }
    row["prefill_slowdown"] = {
        "pred": _ratio(pred.get("prefill_concurrent"), pred.get("prefill_alone")),
        "meas": _ratio(median_s(m.prefill_concurrent), median_s(m.prefill_alone)),
    }
    skew = median_s(m.start_skew)
    row["start_skew_ms"] = _ms(skew)
    row["notes"] = list(m.notes)
    row["error"] = m.error
    return row


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def summarize(rows: Sequence[dict]) -> dict:
    """|relative error| per phase over the rows (median and max) and over every phase."""
    out: dict = {}
    every: list[float] = []
    for phase in PHASES:
        errs = [abs(r[phase]["rel_err"]) for r in rows if r[phase]["rel_err"] is not None]
        every += errs
        out[phase] = {"n": len(errs), "median_abs_rel_err": median_s(errs),
                      "max_abs_rel_err": max(errs) if errs else None}
    out["all"] = {"n": len(every), "median_abs_rel_err": median_s(every),
                  "max_abs_rel_err": max(every) if every else None}
    return out


def build_report(setup: dict, config: dict, lm: LatencyModel, lm_full: LatencyModel,
                 decode: Batch, prefill: Batch, measured: Sequence[Measured]) -> dict:
    """The JSON document: setup (mode, partition backend, timing), config, rows, summary."""
    rows = [compare(m, predictions(lm, decode, prefill, m.sms_decode, m.sms_prefill),
                    predictions(lm_full, decode, prefill, m.sms_decode, m.sms_prefill))
            for m in measured]
    return {
        "check": "concurrent_check",
        **setup,
        "config": config,
        "model": {"name": lm_full.model.name, "layers_run": lm.model.num_layers,
                  "layers_full": lm_full.model.num_layers, "hardware": lm.hardware.name,
                  "calibration": "default (uncalibrated)"},
        "workload": {"decode": {"requests": int(decode.n), "context": int(decode.c[0])},
                     "prefill": {"tokens": int(prefill.q[0]), "context": int(prefill.c[0])}},
        "rows": rows,
        "summary": summarize(rows),
    }


def format_table(report: dict) -> str:
    """Fixed-width table: one line per menu entry, predicted/measured ms and error per phase."""
    head = (f"{'S_d/S_p':>9} | {'phase':<18} {'pred ms':>9} {'meas ms':>9} {'err':>7}"
            f" | {'full-model est ms':>17}")
    lines = [f"mode: {report.get('mode')} ({report.get('timing', '?')}); "
             f"{report['model']['layers_run']} of {report['model']['layers_full']} layers, "
             f"predicted for {report['model']['hardware']}", head, "-" * len(head)]
    for r in report["rows"]:
        split = "whole" if r["sms_decode"] is None else f"{r['sms_decode']}/{r['sms_prefill']}"
        if r.get("error"):
            lines.append(f"{split:>9} | FAILED: {r['error']}")
            continue
        for phase in PHASES:
            c = r[phase]
            if c["meas_ms"] is None:
                continue
            lines.append(f"{split:>9} | {phase:<18} {_f(c['pred_ms'], 9)} {_f(c['meas_ms'], 9)} "
                         f"{_pct(c['rel_err'])} | {_f(c['meas_full_model_est_ms'], 17)}")
            split = ""
        sd = r["decode_slowdown"]
        if sd["meas"] is not None:
            lines.append(f"{'':>9} | decode slowdown    {_f(sd['pred'], 9, 3)} "
                         f"{_f(sd['meas'], 9, 3)} {_pct(rel_error(sd['pred'], sd['meas']))} |")
    a = report["summary"]["all"]
    if a["n"]:
        lines.append(f"|rel err| over {a['n']} values: median {a['median_abs_rel_err']:.1%}, "
                     f"max {a['max_abs_rel_err']:.1%}")
    return "\n".join(lines)


def _f(x: float | None, width: int, digits: int = 3) -> str:
    return f"{'-':>{width}}" if x is None else f"{x:{width}.{digits}f}"


def _pct(x: float | None) -> str:
    return f"{'-':>7}" if x is None else f"{x:+7.1%}"
