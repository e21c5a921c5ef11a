"""Breakdown: the predicted time of one iteration and its parts."""

from __future__ import annotations

from typing import NamedTuple


class Breakdown(NamedTuple):
    """Predicted time of one iteration, seconds, plus its FLOPs and HBM bytes (one GPU).

    total_s = token_ops_s + attention_s + comm_s (all layers) + lm_head_s + host_s.
    `bytes` counts HBM traffic of the compute operators (weights, activations, KV cache), not
    NVLink traffic. `host_s`: CPU scheduling, kernel or graph launch and syncs of the pass.
    A NamedTuple, not a frozen dataclass: several are built per plan, and a tuple is built
    about 4x sooner (immutable either way).
    """

    total_s: float
    token_ops_s: float
    attention_s: float
    comm_s: float
    lm_head_s: float
    flops: float
    bytes: float
    host_s: float = 0.0


ZERO = Breakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
