"""Measured samples for calibration: the CSV format shared by the GPU profiler and the fitter.

One row per measured iteration::

    hardware,model,tp,sms,batch,seconds[,split]
    h200,qwen3-8b,1,132,8192@0,0.1534
    h200,qwen3-8b,1,66,8x1@32768,0.0211

`batch` is ';'-separated groups ``[Nx]Q@C``: N requests (default 1) with q = Q new tokens and
c = C cached ones. `sms` may be empty (the whole device). `split` is optional: ``train`` or
``test``; without it the fitter holds out a deterministic fifth of the rows.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..latency.batch import Batch
from ..latency.model import ModelSpec

FIELDS = ("hardware", "model", "tp", "sms", "batch", "seconds", "split")
_GROUP = re.compile(r"^\s*(?:(\d+)\s*x\s*)?(\d+)\s*(?:@\s*(\d+))?\s*$")
BATCH_FORMS = "';'-separated [N x]Q[@C] groups, e.g. '8192@0' or '8x1@32768;2048@4096'"


@dataclass(frozen=True, eq=False)
class Sample:
    """One measured pass. `model`: a built-in name, a Hugging Face config path, or a shape.
    `cpu_share`: CPU-scheduled iterations in the pass (1: a serving loop's step; 0: an
    engine-level timing; 1/N: N decode steps per scheduler call)."""

    hardware: str
    model: str | ModelSpec
    tp: int
    sms: int | None
    batch: Batch
    seconds: float
    split: str = ""
    cpu_share: float = 1.0


def parse_batch(spec: str) -> Batch:
    """Batch from a spec like ``8x1@32768;2048@0``; ValueError naming the accepted form."""
    qs: list[np.ndarray] = []
    cs: list[np.ndarray] = []
    for group in spec.split(";"):
        m = _GROUP.match(group)
        if m is None or int(m.group(2)) == 0 or (m.group(1) is not None and int(m.group(1)) == 0):
            raise ValueError(f"bad batch group {group!r}; expected {BATCH_FORMS}")
        n = int(m.group(1) or 1)
        qs.append(np.full(n, int(m.group(2)), np.int64))
        cs.append(np.full(n, int(m.group(3) or 0), np.int64))
    return Batch(np.concatenate(qs), np.concatenate(cs))


def format_batch(batch: Batch) -> str:
    """Inverse of `parse_batch`: consecutive identical requests are grouped as NxQ@C."""
    groups: list[str] = []
    pairs = batch.pairs()
    i = 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j] == pairs[i]:
            j += 1
        q, c = pairs[i]
        groups.append(f"{q}@{c}" if j - i == 1 else f"{j - i}x{q}@{c}")
        i = j
    return ";".join(groups)


def read_samples(path: str | os.PathLike) -> list[Sample]:
    """Parse a samples CSV; ValueError with the line number on any malformed row."""
    out: list[Sample] = []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = {"hardware", "model", "tp", "batch", "seconds"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing columns {', '.join(sorted(missing))}")
        for lineno, row in enumerate(reader, start=2):
            try:
                seconds = float(row["seconds"])
                if not seconds > 0:
                    raise ValueError(f"seconds must be > 0, got {seconds}")
                sms_raw = (row.get("sms") or "").strip()
                out.append(Sample(
                    hardware=row["hardware"].strip(),
                    model=row["model"].strip(),
                    tp=int(row["tp"]),
                    sms=int(sms_raw) if sms_raw else None,
                    batch=parse_batch(row["batch"]),
                    seconds=seconds,
                    split=(row.get("split") or "").strip(),
                ))
            except (ValueError, TypeError) as e:
                raise ValueError(f"{path}:{lineno}: {e}") from None
    if not out:
        raise ValueError(f"{path}: no samples")
    return out


def write_samples(path: str | os.PathLike, samples: Iterable[Sample]) -> int:
    """Write samples as CSV; returns the number of rows."""
    n = 0
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(FIELDS)
        for s in samples:
            sms = "" if s.sms is None else str(s.sms)
            w.writerow([s.hardware, s.model, s.tp, sms, format_batch(s.batch),
                        f"{s.seconds:.9g}", s.split])
            n += 1
    return n
