"""The latency model's predicted vs measured iteration times, read from a `--duet-plan-log`.

Each line is one `BatchPlan.to_dict()` plus `measured_s` (the iteration's wall time as the
scheduler measured it, seconds). Relative error = (predicted - measured) / measured, per mode.
The first `WARMUP` iterations of each file (first-use compilation, allocator growth) are
reported apart and left out of the error figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

WARMUP = 5


def read_plan_log(path: Path) -> list[dict]:
    """Every record of one plan-log file, in order."""
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def _rows(paths: list[Path]) -> tuple[list[dict], int]:
    rows, skipped = [], 0
    for path in paths:
        busy = [r for r in read_plan_log(path) if r.get("mode") != "idle"]
        skipped += min(WARMUP, len(busy))
        rows += busy[WARMUP:]
    return rows, skipped


def summarize_plan_log(paths: list[Path]) -> dict:
    """Per mode: iterations, median predicted and measured ms, median and p90 |relative error|."""
    rows, warm = _rows(paths)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["mode"]] = counts.get(r["mode"], 0) + 1
    by_mode = {}
    for mode in sorted(counts):
        pairs = [(r["predicted_total_s"], r["measured_s"]) for r in rows
                 if r["mode"] == mode and r.get("measured_s")]
        if not pairs:
            continue
        pred, meas = np.array(pairs).T
        err = (pred - meas) / meas
        by_mode[mode] = {
            "iterations": len(pairs),
            "pred_ms_median": round(float(np.median(pred)) * 1e3, 3),
            "meas_ms_median": round(float(np.median(meas)) * 1e3, 3),
            "rel_err_median": round(float(np.median(err)), 4),
            "abs_rel_err_median": round(float(np.median(np.abs(err))), 4),
            "abs_rel_err_p90": round(float(np.percentile(np.abs(err), 90)), 4),
        }
    return {"files": [Path(p).name for p in paths], "warmup_iterations_left_out": warm,
            "iterations_by_mode": counts, "by_mode": by_mode,
            "ok": bool(by_mode) or not rows}
