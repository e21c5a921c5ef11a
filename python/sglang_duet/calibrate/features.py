"""The latency model as a function of its calibration parameters, over many samples at once.

Every sample's prediction is ``sum_i max(uF_i * xc[k_i], uB_i / g(S) * xb[k_i]) + link * x_link
+ n_ar * latency + host`` where (uF_i, uB_i) are the operator instances of
`reference.iteration_work` timed at 100% efficiency on the whole device's bandwidth, k_i their
class, x = 1 / efficiency, g the bandwidth curve, and host the `reference.host_seconds` of a
scheduled pass: ``iteration + n_launch * launch_layer + n_replay * graph_replay + rows *
request``. A test keeps
`Features.predict` equal to `LatencyModel.predict`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..latency.calibration import CLASSES, Calibration
from ..latency.hardware import HardwareSpec, bandwidth_curve, get_hardware
from ..latency.model import resolve_model
from ..latency.ops import allreduce_link_bytes, logits_gather_link_bytes
from ..latency.reference import iteration_work
from .samples import Sample

# Calibration parameters in design-matrix column order: two per class (inverse efficiencies),
# the link's inverse efficiency, then seconds: all-reduce latency and the host terms.
HOST = ("iteration_overhead_s", "launch_layer_s", "graph_replay_s", "request_overhead_s")
PARAMS = tuple(f"{k}_{p}" for k in CLASSES for p in ("compute", "bw")) + (
    "link", "allreduce_latency_s", *HOST)
N_INV = 2 * len(CLASSES) + 1  # parameters stored as 1 / efficiency
_CLS = {k: i for i, k in enumerate(CLASSES)}


@dataclass(frozen=True, eq=False)
class Features:
    """Operator instances of many samples, flattened."""

    hardware: HardwareSpec
    frac: np.ndarray  # per sample: usable SM fraction
    seconds: np.ndarray  # per sample: measured (or target) time
    row: np.ndarray  # per instance: sample index
    cls: np.ndarray  # per instance: class index
    u_f: np.ndarray  # per instance: compute seconds at efficiency 1
    u_b: np.ndarray  # per instance: memory seconds at efficiency 1 and full-device bandwidth
    fixed: np.ndarray  # per sample: link s, all-reduces, CPU iterations, eager layers, graph
    # replays, sampling rows

    @property
    def n(self) -> int:
        return int(self.seconds.size)

    def to_vector(self, cal: Calibration) -> np.ndarray:
        inv = [1.0 / getattr(cal, p) for p in PARAMS[:N_INV]]
        return np.array(inv + [getattr(cal, p) for p in PARAMS[N_INV:]])

    def curve(self, knee: float, hill: float) -> np.ndarray:
        """Per-instance 1 / g(S) for a bandwidth curve."""
        g = np.array([bandwidth_curve(f, knee, hill) for f in self.frac])
        return (1.0 / g)[self.row]

    def predict(self, x: np.ndarray, inv_g: np.ndarray) -> np.ndarray:
        """Per-sample seconds for parameter vector `x` and per-instance 1/g."""
        t = np.maximum(self.u_f * x[2 * self.cls], self.u_b * inv_g * x[2 * self.cls + 1])
        return np.bincount(self.row, weights=t, minlength=self.n) + self.fixed @ x[N_INV - 1:]


def build_features(samples: Sequence[Sample], seconds: np.ndarray | None = None) -> Features:
    """Flatten samples into operator instances. Samples may come from several GPUs when each
    ran on its whole device (the bandwidth curve is then not exercised)."""
    names = sorted({s.hardware for s in samples})
    if not names:
        raise ValueError("no samples")
    if len(names) > 1 and any(s.sms is not None for s in samples):
        raise ValueError(f"partitioned samples must come from one hardware, got {names}")
    rows, cls, u_f, u_b, frac, fixed = [], [], [], [], [], []
    for i, s in enumerate(samples):
        hw = get_hardware(s.hardware)
        m = resolve_model(s.model, s.tp)
        b = s.batch
        sms = hw.usable_sms(s.sms)
        frac.append(sms / hw.num_sms)
        for w in iteration_work(m, b):
            rows.append(np.full(w.flops.size, i))
            cls.append(np.full(w.flops.size, _CLS[w.cls]))
            u_f.append(w.flops / hw.compute(sms))
            u_b.append(w.nbytes / hw.hbm_bw)
        L, T, n_rows = m.num_layers, b.tokens, b.n_sample
        link = (L * 2 * allreduce_link_bytes(m, T) + logits_gather_link_bytes(m, n_rows))
        n_ar = 0 if m.tp == 1 else 2 * L + (1 if n_rows else 0)
        decode_only = b.n_decode == T
        fixed.append((link / hw.link_bw, n_ar, s.cpu_share, 0.0 if decode_only else L,
                      1.0 if decode_only else 0.0, n_rows if s.cpu_share else 0))
    secs = np.array([s.seconds for s in samples]) if seconds is None else np.asarray(seconds)
    return Features(
        hardware=get_hardware(names[0]),
        frac=np.array(frac),
        seconds=secs.astype(np.float64),
        row=np.concatenate(rows).astype(np.int64),
        cls=np.concatenate(cls).astype(np.int64),
        u_f=np.concatenate(u_f).astype(np.float64),
        u_b=np.concatenate(u_b).astype(np.float64),
        fixed=np.array(fixed, dtype=np.float64).reshape(-1, 6),
    )
