"""Breakdown: the predicted time of one iteration and its parts."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Predicted time of one iteration, seconds, plus its FLOPs and HBM bytes (one GPU).

    total_s = token_ops_s + attention_s + comm_s (all layers) + lm_head_s + overhead_s.
    `bytes` counts HBM traffic of the compute operators (weights, activations, KV cache), not
    NVLink traffic.
    """

    total_s: float
    token_ops_s: float
    attention_s: float
    comm_s: float
    lm_head_s: float
    flops: float
    bytes: float
    overhead_s: float = 0.0

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def scaled(self, factor: float) -> Breakdown:
        """Same work, every time component stretched by `factor` (used for contention)."""
        return Breakdown(
            self.total_s * factor,
            self.token_ops_s * factor,
            self.attention_s * factor,
            self.comm_s * factor,
            self.lm_head_s * factor,
            self.flops,
            self.bytes,
            self.overhead_s * factor,
        )


ZERO = Breakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
