"""Read the public request traces in benchmark/traces/ into one record type.

Azure 2023 CSVs: `TIMESTAMP,ContextTokens,GeneratedTokens` (wall clock, 7 fractional digits).
Mooncake JSONL: `timestamp` (ms from trace start), `input_length`, `output_length`, `hash_ids`
(one id per 512-token prefix block). The files are stored xz-compressed and read through
`sglang_duet.sim.traces.open_trace`. See benchmark/traces/README.md.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from datetime import datetime

from sglang_duet.sim.traces import open_trace

TRACE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "traces")
TRACES = {
    "azure_code": "azure_code_2023.csv.xz",
    "azure_conv": "azure_conv_2023.csv.xz",
    "mooncake": "mooncake_conversation.jsonl.xz",
}
MOONCAKE_BLOCK = 512  # tokens per hash_ids entry


@dataclass(frozen=True)
class TraceRequest:
    arrival_s: float  # seconds from the first request of the trace
    input_len: int
    output_len: int
    hash_ids: tuple[int, ...] = field(default=())


def trace_path(name: str) -> str:
    if name not in TRACES:
        raise ValueError(f"unknown trace {name!r}; choose from {sorted(TRACES)}")
    return os.path.join(TRACE_DIR, TRACES[name])


def _azure_time(stamp: str) -> float:
    # strptime's %f takes at most 6 fractional digits; the files have 7.
    return datetime.strptime(stamp[:26], "%Y-%m-%d %H:%M:%S.%f").timestamp()


def load_azure(path: str) -> list[TraceRequest]:
    with open_trace(path) as f:
        rows = list(csv.DictReader(f))
    t0 = _azure_time(rows[0]["TIMESTAMP"])
    return [
        TraceRequest(_azure_time(r["TIMESTAMP"]) - t0, int(r["ContextTokens"]),
                     int(r["GeneratedTokens"]))
        for r in rows
    ]


def load_mooncake(path: str) -> list[TraceRequest]:
    out = []
    with open_trace(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                out.append(TraceRequest(r["timestamp"] / 1000.0, int(r["input_length"]),
                                        int(r["output_length"]), tuple(r["hash_ids"])))
    t0 = out[0].arrival_s if out else 0.0
    return [TraceRequest(r.arrival_s - t0, r.input_len, r.output_len, r.hash_ids) for r in out]


def load_trace(name: str) -> list[TraceRequest]:
    path = trace_path(name)
    return load_mooncake(path) if ".jsonl" in os.path.basename(path) else load_azure(path)
