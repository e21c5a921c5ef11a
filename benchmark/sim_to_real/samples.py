"""Measured iterations from sglang-duet's `--duet-plan-log`, as calibration samples.

A plan-log line is the BatchPlan that ran plus `measured_s` (run + process of the batch) and
`end_s` (wall clock when it was recorded). The batch's (q, c) rows are rebuilt by replaying the
log in order: a prefill chunk is ``q = length, c = start`` and samples a token when it is its
request's last chunk in the log; a decode row of a request whose prompt holds P tokens and which
has produced g tokens is ``q = 1, c = P + g - 1`` (the simulator's `Request.kv_tokens` rule).

Seconds: what the simulator needs is the loop's period, scheduling included. Consecutive lines
give it (``end_i - end_{i-1}``) when the scheduler did not wait in between; the wait-free pairs
are those whose gap outside `measured_s` is at most `BACK_TO_BACK_S`. Other iterations get
`measured_s` plus the median gap of the wait-free ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from sglang_duet.calibrate.samples import Sample
from sglang_duet.latency import Batch

WARMUP = 5  # first busy lines of a log: first-use allocation, left out
BACK_TO_BACK_S = 0.02  # gap outside the measured part up to which the loop did not wait


def read_plan_log(paths: Iterable[str | Path]) -> list[list[dict]]:
    """Busy lines (mode != idle) of each file, in order."""
    out = []
    for p in paths:
        lines = [json.loads(x) for x in Path(p).read_text().splitlines() if x.strip()]
        out.append([r for r in lines if r.get("mode") != "idle"])
    return out


def rebuild_batches(rows: list[dict]) -> list[Batch]:
    """Each line's batch as (q, c, sample) rows (decodes first, then chunks, plan order)."""
    last_chunk: dict[str, int] = {}
    for i, r in enumerate(rows):
        for ch in r["prefill"]:
            last_chunk[ch["rid"]] = i
    prompt: dict[str, int] = {}
    gen: dict[str, int] = {}
    out = []
    for i, r in enumerate(rows):
        q, c, s = [], [], []
        for rid in r["decode_rids"]:
            g = gen.get(rid, 1)
            q.append(1)
            c.append(prompt.get(rid, 0) + g - 1)
            s.append(True)
            gen[rid] = g + 1
        for ch in r["prefill"]:
            rid = ch["rid"]
            done = last_chunk[rid] == i
            q.append(ch["length"])
            c.append(ch["start"])
            s.append(done)
            prompt[rid] = ch["start"] + ch["length"]
            if done:
                gen[rid] = 1
        out.append(Batch(q, c, s))
    return out


def periods(rows: list[dict]) -> tuple[list[float], float, int]:
    """(seconds per line, median scheduling gap, wait-free lines)."""
    meas = [float(r["measured_s"]) for r in rows]
    ends = [r.get("end_s") for r in rows]
    gaps = [None] + [
        (ends[i] - ends[i - 1] - meas[i]) if ends[i] is not None and ends[i - 1] is not None
        else None for i in range(1, len(rows))]
    free = [g for g in gaps if g is not None and 0.0 <= g <= BACK_TO_BACK_S]
    med = float(np.median(free)) if free else 0.0
    secs = [m + g if g is not None and 0.0 <= g <= BACK_TO_BACK_S else m + med
            for m, g in zip(meas, gaps, strict=True)]
    return secs, med, len(free)


def plan_log_samples(paths: Iterable[str | Path], hardware: str, model: str
                     ) -> tuple[list[Sample], dict]:
    """Calibration samples of every file's busy lines after its first `WARMUP`, and a summary
    (lines, the median scheduling gap in ms, wait-free share)."""
    samples: list[Sample] = []
    used = waitfree = 0
    gaps = []
    for rows in read_plan_log(paths):
        batches = rebuild_batches(rows)
        secs, gap, free = periods(rows)
        gaps.append(gap)
        for b, sec, _ in list(zip(batches, secs, rows, strict=True))[WARMUP:]:
            if b.tokens and sec > 0:
                samples.append(Sample(hardware, model, 1, None, b, sec))
        used += max(0, len(rows) - WARMUP)
        waitfree += free
    return samples, {"lines": used, "sched_gap_ms_median": round(1e3 * float(np.median(gaps)), 3)
                     if gaps else None, "wait_free_lines": waitfree}


def busy_in_window(paths: Iterable[str | Path], window: tuple[float, float]) -> dict:
    """Seconds of loop period per iteration kind (decode_only, mixed, prefill_only) of the
    lines recorded inside `window` (wall clock), like `simulate.busy_by_kind`."""
    out = {"decode_only": 0.0, "mixed": 0.0, "prefill_only": 0.0}
    for rows in read_plan_log(paths):
        secs, _, _ = periods(rows)
        for r, sec in zip(rows, secs, strict=True):
            if r.get("end_s") is None or not window[0] <= r["end_s"] <= window[1]:
                continue
            kind = ("mixed" if r["decode_rids"] else "prefill_only") if r["prefill"] \
                else "decode_only"
            out[kind] += sec
    return {k: round(v, 3) for k, v in out.items()}
