"""Breakdown: the predicted time of one iteration and its parts (Breakdowns: at many SM counts)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Predicted time of one iteration, seconds, plus its FLOPs and HBM bytes (one GPU).

    total_s = token_ops_s + attention_s + comm_s (all layers) + lm_head_s + host_s.
    `bytes` counts HBM traffic of the compute operators (weights, activations, KV cache), not
    NVLink traffic. `host_s`: CPU scheduling, kernel or graph launch and syncs of the pass.
    """

    total_s: float
    token_ops_s: float
    attention_s: float
    comm_s: float
    lm_head_s: float
    flops: float
    bytes: float
    host_s: float = 0.0

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


ZERO = Breakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True, slots=True)
class Breakdowns:
    """`Breakdown` at many SM counts: time components are arrays (one entry per SM count);
    flops, bytes and host seconds do not depend on the SM count."""

    total_s: np.ndarray
    token_ops_s: np.ndarray
    attention_s: np.ndarray
    comm_s: np.ndarray
    lm_head_s: np.ndarray
    flops: float
    bytes: float
    host_s: float = 0.0

    def __len__(self) -> int:
        return len(self.total_s)

    def at(self, i: int) -> Breakdown:
        return Breakdown(float(self.total_s[i]), float(self.token_ops_s[i]),
                         float(self.attention_s[i]), float(self.comm_s[i]),
                         float(self.lm_head_s[i]), self.flops, self.bytes, self.host_s)

    @classmethod
    def zero(cls, n: int) -> Breakdowns:
        z = np.zeros(n)
        return cls(z, z, z, z, z, 0.0, 0.0, 0.0)
