"""How much of an iteration is SGLang's host work rather than the model: the same server loop
(sglang-duet aggregated) on the embedded tiny model (hidden 64, 2 layers: its forward is
negligible) replays requests of the same lengths; per iteration class, the tiny model's median
loop period over the benchmark model's is the host share of the benchmark model's iterations.

Classes: decode-only iterations by batch size, iterations with prompt tokens by the tokens
they prefill. A class needs `MIN_ROWS` iterations on both models to be reported.
"""

from __future__ import annotations

import numpy as np

from benchmark.sim_to_real.samples import WARMUP, periods, read_plan_log

DECODE_BINS = ((1, 1), (2, 4), (5, 8), (9, 16), (17, 10**9))
PREFILL_BINS = ((1, 32), (33, 96), (97, 160), (161, 10**9))
MIN_ROWS = 3


def _classes(paths: list[str]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for rows in read_plan_log(paths):
        secs, _, _ = periods(rows)
        for r, s in list(zip(rows, secs, strict=True))[WARMUP:]:
            tokens = sum(c["length"] for c in r["prefill"])
            if tokens:
                key = next(f"prefill {lo}-{hi}" for lo, hi in PREFILL_BINS if lo <= tokens <= hi)
            else:
                n = len(r["decode_rids"])
                key = next(f"decode {lo}-{hi}" for lo, hi in DECODE_BINS if lo <= n <= hi)
            out.setdefault(key, []).append(s)
    return out


def host_shares(model_logs: list[str], tiny_logs: list[str]) -> dict:
    """Per class: iterations and median ms on each model, and the share tiny / model."""
    big, tiny = _classes(model_logs), _classes(tiny_logs)
    out = {}
    for key in sorted(big, key=lambda k: (k.split()[0], int(k.split()[1].split("-")[0]))):
        a, b = big[key], tiny.get(key, [])
        if len(a) < MIN_ROWS or len(b) < MIN_ROWS:
            continue
        ma, mb = float(np.median(a)), float(np.median(b))
        out[key] = {"iterations": len(a), "tiny_iterations": len(b),
                    "model_ms": round(ma * 1e3, 2), "tiny_ms": round(mb * 1e3, 2),
                    "host_share": round(mb / ma, 3) if ma > 0 else None}
    return out
