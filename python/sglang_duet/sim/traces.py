"""Trace loaders: Azure LLM inference 2023 CSVs and the Mooncake FAST'25 JSONL.

A trace is three parallel arrays (arrival seconds from the first request, prompt tokens, output
tokens). Named traces live in ``benchmark/traces/`` at the repository root, xz-compressed (the
tree travels with every GPU call, 64 MiB at most: 4.1 MB of text is 0.4 MB as xz); any other
argument is read as a path (``.csv`` = Azure format, ``.jsonl`` = Mooncake format, either one
optionally ``.xz`` or ``.gz`` compressed).
"""

from __future__ import annotations

import csv
import gzip
import json
import lzma
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import IO

import numpy as np

__all__ = ["TRACES", "Trace", "TraceError", "load_azure", "load_mooncake", "load_trace",
           "open_trace", "trace_dir"]


class TraceError(ValueError):
    """A trace is missing, unreadable or malformed."""


@dataclass(frozen=True, eq=False)
class Trace:
    """Requests of one trace, sorted by arrival; times in seconds relative to the first."""

    name: str
    arrival_s: np.ndarray  # float64
    input_len: np.ndarray  # int64
    output_len: np.ndarray  # int64
    hash_ids: tuple[list[int], ...] | None = None  # Mooncake: prompt block hashes per request

    def __len__(self) -> int:
        return int(self.input_len.shape[0])

    def stats(self) -> dict[str, float]:
        n = len(self)
        dur = float(self.arrival_s[-1] - self.arrival_s[0]) if n else 0.0
        return {
            "requests": n,
            "mean_input": float(self.input_len.mean()) if n else 0.0,
            "mean_output": float(self.output_len.mean()) if n else 0.0,
            "duration_s": dur,
            "mean_rate_rps": n / dur if dur > 0 else 0.0,
        }


def trace_dir() -> str:
    """``<repo>/benchmark/traces`` resolved from this file's location."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    return os.path.join(root, "benchmark", "traces")


def open_trace(path: str) -> IO[str]:
    """A trace file opened as text: ``.xz`` and ``.gz`` are decompressed on the fly (the
    bundled traces are stored as ``.xz``), anything else is read as it is."""
    if path.endswith(".xz"):
        return lzma.open(path, "rt", newline="")
    if path.endswith(".gz"):
        return gzip.open(path, "rt", newline="")
    return open(path, newline="")


def _format_name(path: str) -> str:
    """The file name without a compression suffix (``x.csv.xz`` -> ``x.csv``)."""
    base = os.path.basename(path)
    for suffix in (".xz", ".gz"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def _parse_ts(s: str) -> float:
    # 7 fractional digits; strptime's %f takes at most 6.
    return datetime.strptime(s.strip()[:26], "%Y-%m-%d %H:%M:%S.%f").timestamp()


def load_azure(path: str, name: str | None = None) -> Trace:
    """Azure LLM inference trace 2023 CSV (TIMESTAMP, ContextTokens, GeneratedTokens)."""
    try:
        with open_trace(path) as f:
            rows = list(csv.reader(f))
    except (OSError, EOFError, lzma.LZMAError) as e:
        raise TraceError(f"cannot read trace {path}: {getattr(e, 'strerror', None) or e}") from e
    if not rows or [c.strip() for c in rows[0][:3]] != [
        "TIMESTAMP", "ContextTokens", "GeneratedTokens"
    ]:
        raise TraceError(f"{path}: not an Azure trace CSV (header TIMESTAMP,ContextTokens,...)")
    try:
        body = [r for r in rows[1:] if r]
        ts = np.array([_parse_ts(r[0]) for r in body], dtype=np.float64)
        inp = np.array([int(r[1]) for r in body], dtype=np.int64)
        out = np.array([int(r[2]) for r in body], dtype=np.int64)
    except (ValueError, IndexError) as e:
        raise TraceError(f"{path}: malformed row ({e})") from e
    return _finish(name or _format_name(path), ts, inp, out)


def load_mooncake(path: str, name: str | None = None) -> Trace:
    """Mooncake JSONL (timestamp ms, input_length, output_length, hash_ids: one id per 512-token
    prompt block, kept for the prefix cache).

    The conversation trace's timestamps come in ~3 s buckets; requests sharing a timestamp are
    spread evenly over the gap to the next distinct timestamp (3 s after the last one).
    """
    ts, inp, out, hashes = [], [], [], []
    try:
        with open_trace(path) as f:
            for line in f:
                if not line.strip():
                    continue
                d = json.loads(line)
                ts.append(float(d["timestamp"]) / 1000.0)
                inp.append(int(d["input_length"]))
                out.append(int(d["output_length"]))
                hashes.append([int(h) for h in d.get("hash_ids", ())])
    except (OSError, EOFError, lzma.LZMAError) as e:
        raise TraceError(f"cannot read trace {path}: {getattr(e, 'strerror', None) or e}") from e
    except (ValueError, KeyError, TypeError) as e:
        raise TraceError(f"{path}: not a Mooncake JSONL trace ({e!r})") from e
    t = np.array(ts, dtype=np.float64)
    return _finish(name or _format_name(path), _spread_buckets(t), np.array(inp),
                   np.array(out), hashes if any(hashes) else None)


def _spread_buckets(t: np.ndarray, last_gap: float = 3.0) -> np.ndarray:
    if t.size == 0:
        return t
    uniq, start, counts = np.unique(t, return_index=True, return_counts=True)
    gaps = np.append(np.diff(uniq), last_gap)
    # Position of each request inside its bucket (rows are sorted by timestamp).
    order = np.argsort(t, kind="stable")
    bucket = np.repeat(np.arange(uniq.size), counts)
    pos = np.arange(t.size) - start[bucket]
    spread = np.empty_like(t)
    spread[order] = uniq[bucket] + gaps[bucket] * pos / counts[bucket]
    return spread


def _finish(name: str, ts: np.ndarray, inp: np.ndarray, out: np.ndarray,
            hashes: list[list[int]] | None = None) -> Trace:
    if ts.size == 0:
        raise TraceError(f"{name}: empty trace")
    if (inp < 1).any() or (out < 1).any():
        raise TraceError(f"{name}: token counts must be >= 1")
    order = np.argsort(ts, kind="stable")
    ts = ts[order] - ts[order[0]]
    ordered = None if hashes is None else tuple(hashes[i] for i in order)
    return Trace(name, ts, inp[order].astype(np.int64), out[order].astype(np.int64), ordered)


TRACES: dict[str, tuple[str, Callable[[str, str | None], Trace]]] = {
    "azure-code": ("azure_code_2023.csv.xz", load_azure),
    "azure-conv": ("azure_conv_2023.csv.xz", load_azure),
    "mooncake": ("mooncake_conversation.jsonl.xz", load_mooncake),
}


def load_trace(name_or_path: str, directory: str | None = None) -> Trace:
    """Load a named trace (``TRACES``) from ``directory`` (default: :func:`trace_dir`) or a path."""
    if name_or_path in TRACES:
        fname, loader = TRACES[name_or_path]
        return loader(os.path.join(directory or trace_dir(), fname), name_or_path)
    if not os.path.exists(name_or_path):
        raise TraceError(
            f"unknown trace {name_or_path!r}: not one of {sorted(TRACES)} and no such file"
        )
    if _format_name(name_or_path).endswith(".jsonl"):
        return load_mooncake(name_or_path)
    return load_azure(name_or_path)
