"""The latency model, written once: each operator's work in one iteration and its roofline time.

An iteration of a batch runs, on one GPU, the operators of `ops.py` in every layer (token-level
operators over all T new tokens, one attention per request), the TP all-reduces, the LM head
over the sampling rows, and the host's work (`host_seconds`). Each compute operator takes

    max(FLOPs / (compute(S) * eff_compute), bytes / (bandwidth(S) * eff_bw))      (`op_seconds`)

with the efficiencies of its class (`Calibration`). Attention takes that max per request: a
batch's rows may sit on both sides of the roofline. `predict` and `explain` below, and the
calibration features (`sglang_duet.calibrate.features`), are all derived from `iteration_work`;
`fast/` evaluates the same sums rearranged for speed, and the property tests hold it to this
module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .batch import Batch
from .breakdown import ZERO, Breakdown
from .calibration import Calibration
from .hardware import HardwareSpec
from .model import ModelSpec
from .ops import (
    allreduce_link_bytes,
    attention_coeffs,
    layer_token_ops,
    lm_head_ops,
    logits_gather_link_bytes,
)


@dataclass(frozen=True, eq=False)
class Work:
    """One operator's work in one iteration, all layers: FLOPs and HBM bytes per instance (one
    instance for a token-level operator, one per request for attention)."""

    name: str
    cls: str  # calibration class: gemm, elementwise, attn_decode, attn_prefill
    count: int  # kernel launches (layers x requests for attention)
    flops: np.ndarray
    nbytes: np.ndarray
    part: str  # Breakdown field it adds to: token_ops, attention, lm_head


def iteration_work(m: ModelSpec, b: Batch) -> list[Work]:
    """Every compute operator's work in one iteration of `b` (empty for an empty batch)."""
    L, T, rows = m.num_layers, b.tokens, b.n_sample
    if T == 0:
        return []
    one = np.ones(1)
    out = [Work(op.name, op.cls, L, one * (L * op.flops(T)), one * (L * op.bytes(T)),
                "token_ops") for op in layer_token_ops(m)]
    a = attention_coeffs(m)
    q, c = b.q.astype(np.float64), b.c.astype(np.float64)
    for cls, mask in (("attn_decode", b.q == 1), ("attn_prefill", b.q > 1)):
        if mask.any():
            qm, cm = q[mask], c[mask]
            attended = qm * cm + qm * (qm + 1.0) * 0.5  # new token j sees c + j + 1 keys
            nbytes = a.bytes_per_q * qm + a.bytes_per_kv * (cm + qm)
            out.append(Work(cls, cls, L * int(mask.sum()), L * a.flops_per_attended * attended,
                            L * nbytes, "attention"))
    if rows:
        out += [Work(op.name, op.cls, 1, one * op.flops(rows), one * op.bytes(rows), "lm_head")
                for op in lm_head_ops(m)]
    return out


def link_seconds(m: ModelSpec, hw: HardwareSpec, cal: Calibration, tokens: int, rows: int
                 ) -> tuple[float, float]:
    """(all-reduce seconds of one layer, logits-gather seconds); 0 without TP. Communication is
    NVLink bound and does not depend on the SM count (NCCL's few SMs are ignored)."""
    if m.tp == 1:
        return 0.0, 0.0
    per_byte = 1.0 / (hw.link_bw * cal.link)
    comm = 2.0 * (allreduce_link_bytes(m, tokens) * per_byte + cal.allreduce_latency_s)
    gather = 0.0
    if rows:
        gather = logits_gather_link_bytes(m, rows) * per_byte + cal.allreduce_latency_s
    return comm, gather


def op_seconds(w: Work, hw: HardwareSpec, cal: Calibration, sms: int | None
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per instance, (compute seconds, memory seconds) of `w` on `sms` SMs; the operator takes
    the larger of the two (the roofline)."""
    ec, eb = cal.efficiency(w.cls)
    return w.flops / (hw.compute(sms) * ec), w.nbytes / (hw.bandwidth(sms) * eb)


def predict(hw: HardwareSpec, m: ModelSpec, cal: Calibration, b: Batch, sms: int | None,
            host_s: float) -> Breakdown:
    """One iteration of `b` on `sms` SMs, `host_s` seconds of host overhead added."""
    work = iteration_work(m, b)
    if not work:
        return ZERO
    parts = {"token_ops": 0.0, "attention": 0.0, "lm_head": 0.0}
    for w in work:
        parts[w.part] += float(np.maximum(*op_seconds(w, hw, cal, sms)).sum())
    comm, gather = link_seconds(m, hw, cal, b.tokens, b.n_sample)
    comm *= m.num_layers
    head = parts["lm_head"] + gather
    flops = sum(float(w.flops.sum()) for w in work)
    nbytes = sum(float(w.nbytes.sum()) for w in work)
    total = parts["token_ops"] + parts["attention"] + comm + head + host_s
    return Breakdown(total, parts["token_ops"], parts["attention"], comm, head, flops, nbytes,
                     host_s)


def explain(hw: HardwareSpec, m: ModelSpec, cal: Calibration, b: Batch, sms: int | None,
            host_s: float) -> list[dict[str, object]]:
    """Per-operator rows (name, class, count, flops, bytes, seconds, bound) whose seconds add up
    to `predict(...).total_s`."""
    out = []
    for w in iteration_work(m, b):
        t_c, t_m = op_seconds(w, hw, cal, sms)
        out.append(_row(w.name, w.cls, w.count, float(w.flops.sum()), float(w.nbytes.sum()),
                        float(np.maximum(t_c, t_m).sum()), t_c.sum() >= t_m.sum()))
    if not out:
        return out
    comm, gather = link_seconds(m, hw, cal, b.tokens, b.n_sample)
    if comm:
        out.append(_row("allreduce", "comm", 2 * m.num_layers, 0.0, 0.0, m.num_layers * comm))
    if gather:
        out.append(_row("logits_gather", "comm", 1, 0.0, 0.0, gather))
    if host_s:
        out.append({**_row("host", "host", 1, 0.0, 0.0, host_s), "bound": "cpu"})
    return out


def _row(name: str, cls: str, count: int, flops: float, nbytes: float, seconds: float,
         compute_bound: bool = False) -> dict[str, object]:
    return {"name": name, "class": cls, "count": count, "flops": flops, "bytes": nbytes,
            "seconds": seconds, "bound": "compute" if compute_bound else "memory"}


def host_seconds(m: ModelSpec, cal: Calibration, decode_only: bool, kind: str = "scheduled",
                 rows: int = 0, after: str | None = None) -> float:
    """Host seconds of one forward pass with `rows` sampling rows (see `Calibration` for the
    figures behind each term): ``host_fixed + start_delay(after) + rows * host_per_row``.
    ``after``: the host kind of the decode step launched before this pass (`start_delay`)."""
    fixed = host_fixed(m, cal, decode_only, kind) + start_delay(m, cal, after)
    return fixed + rows * host_per_row(cal)


def start_delay(m: ModelSpec, cal: Calibration, after: str | None) -> float:
    """Seconds a spatial prefill waits on the host before its launch begins: the runtime
    launches decode step 0 first, then the prefill, then steps 1..k-1
    (`runtime.scheduler._step_spatial`), so the prefill's partition idles for one decode step's
    launch, of host kind ``after`` (no sampling rows: those are processed after every launch).
    0 for None (nothing launched before the pass)."""
    if after is None:
        return 0.0
    return host_fixed(m, cal, True, after)


def host_fixed(m: ModelSpec, cal: Calibration, decode_only: bool, kind: str) -> float:
    """kind "scheduled": a pass the CPU scheduler runs (SGLang's loop, pdmux's decode steps):
    the per-iteration CPU cost (schedule, prepare inputs, sample, sync) plus launching the pass:
    one CUDA-graph replay for a decode-only batch, ``layers`` layers of eager launches
    otherwise. "lookahead": one of duet's k back-to-back decode steps on its partition: a graph
    replay only (no CPU round trip in between). "lookahead_eager": the same step where no
    decode graph was captured for the partition (libsmctrl, `--duet-decode-graph-sizes 0`): its
    layers' kernels launched eagerly, still with no CPU round trip. "spatial": the prefill side
    of a spatial iteration, which also carries the iteration's once-costs: the CPU iteration,
    the eager prefill launches and the join of the two phases' streams."""
    launch = cal.graph_replay_s if decode_only else m.num_layers * cal.launch_layer_s
    if kind == "scheduled":
        return cal.iteration_overhead_s + launch
    if kind == "lookahead":
        return cal.graph_replay_s
    if kind == "lookahead_eager":
        return m.num_layers * cal.launch_layer_s
    check_host_kind(kind)
    return cal.iteration_overhead_s + launch + cal.join_s  # "spatial"


def check_host_kind(kind: str) -> None:
    """ValueError naming the accepted kinds unless `kind` is one of `HOST_KINDS`."""
    if kind not in HOST_KINDS:
        raise ValueError(f"unknown host kind {kind!r}; accepted: {', '.join(HOST_KINDS)}")


def host_per_row(cal: Calibration) -> float:
    """CPU seconds per sampling row (sample, stop check, detokenize): every pass pays it per
    token it produces, a look-ahead step as well."""
    return cal.request_overhead_s


HOST_KINDS = ("scheduled", "lookahead", "lookahead_eager", "spatial")
