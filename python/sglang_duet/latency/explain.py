"""Per-operator breakdown of one prediction, for `python -m sglang_duet.latency explain`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .batch import Batch
from .ops import allreduce_link_bytes, logits_gather_link_bytes

if TYPE_CHECKING:
    from .predictor import LatencyModel


def _row(name: str, cls: str, count: int, flops: float, nbytes: float, t_c: float, t_m: float,
         seconds: float | None = None) -> dict[str, object]:
    secs = max(t_c, t_m) if seconds is None else seconds
    bound = "compute" if t_c >= t_m else "memory"
    return {"name": name, "class": cls, "count": count, "flops": flops, "bytes": nbytes,
            "seconds": secs, "bound": bound}


def explain_rows(lm: LatencyModel, b: Batch, sms: int | None) -> list[dict[str, object]]:
    """Rows whose `seconds` sum to `lm.predict(b, sms).total_s` (count = times it runs)."""
    if b.tokens == 0:
        return []
    hw, m, cal = lm.hardware, lm.model, lm.calibration
    compute, bw = hw.compute(sms), hw.bandwidth(sms)
    L, T, rows = m.num_layers, b.tokens, b.n_sample
    out = []
    for op in lm.token_ops:
        ec, eb = cal.efficiency(op.cls)
        f, by = op.flops(T), op.bytes(T)
        out.append(_row(op.name, op.cls, L, L * f, L * by,
                        L * f / (compute * ec), L * by / (bw * eb)))
    a = lm.att
    for cls, mask in (("attn_decode", b.is_decode), ("attn_prefill", ~b.is_decode & (b.q > 0))):
        if not mask.any():
            continue
        ec, eb = cal.efficiency(cls)
        f = L * a.flops_per_attended * b.attended[mask]
        by = L * (a.bytes_per_q * b.qf[mask] + a.bytes_per_kv * b.kvf[mask])
        t_c, t_m = f / (compute * ec), by / (bw * eb)
        out.append(_row(cls, cls, L * int(mask.sum()), float(f.sum()), float(by.sum()),
                        float(t_c.sum()), float(t_m.sum()), float(np.maximum(t_c, t_m).sum())))
    if m.tp > 1:
        link = 1.0 / (hw.link_bw * cal.link)
        t = 2 * L * (allreduce_link_bytes(m, T) * link + cal.allreduce_latency_s)
        out.append(_row("allreduce", "comm", 2 * L, 0.0, 0.0, 0.0, t))
    if rows:
        for op in lm.head_ops:
            ec, eb = cal.efficiency(op.cls)
            f, by = op.flops(rows), op.bytes(rows)
            out.append(_row(op.name, op.cls, 1, f, by, f / (compute * ec), by / (bw * eb)))
        if m.tp > 1:
            t = (logits_gather_link_bytes(m, rows) / (hw.link_bw * cal.link)
                 + cal.allreduce_latency_s)
            out.append(_row("logits_gather", "comm", 1, 0.0, 0.0, 0.0, t))
    if cal.iteration_overhead_s:
        out.append(_row("overhead", "overhead", 1, 0.0, 0.0, 0.0, cal.iteration_overhead_s))
    return out


def format_table(rows: list[dict[str, object]]) -> str:
    total = sum(float(r["seconds"]) for r in rows) or 1.0
    lines = [f"{'operator':<16}{'class':<14}{'count':>6}{'GFLOP':>12}{'GB':>10}"
             f"{'ms':>10}{'share':>8}  bound"]
    for r in rows:
        s = float(r["seconds"])
        lines.append(
            f"{r['name']!s:<16}{r['class']!s:<14}{r['count']!s:>6}{float(r['flops']) / 1e9:>12.1f}"
            f"{float(r['bytes']) / 1e9:>10.3f}{s * 1e3:>10.3f}{s / total:>8.1%}  {r['bound']}"
        )
    return "\n".join(lines)
