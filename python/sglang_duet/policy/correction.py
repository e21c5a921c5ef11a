"""Online correction of latency predictions from observed iteration times.

One factor per (mode, phase) key, e.g. ``("aggregated", "total")``, ``("spatial", "decode")``,
``("spatial", "prefill")``, ``("decode_only", "decode")``. Each factor is an EWMA of
``measured / raw_prediction``, clamped to ``[lo, hi]``, and starts at 1. Later predictions of that
(mode, phase) are multiplied by it. With ``enabled=False`` every factor stays 1.

``margin(mode, phase)`` is the safety factor the policy plans with: ``1 + z * spread / factor``,
where ``spread`` is an EWMA of the ratio's deviation from the factor (a running standard
deviation, z = 2). It is 1 while predictions are exact (always so in the simulator) and grows
with the measured jitter, so TBT targets keep a margin learned from the same observations.
"""

from __future__ import annotations

import math

PHASES: tuple[tuple[str, str], ...] = (
    ("aggregated", "total"),
    ("spatial", "decode"),
    ("spatial", "prefill"),
    ("decode_only", "decode"),
)


class Correction:
    def __init__(
        self, enabled: bool = True, alpha: float = 0.2, lo: float = 0.25, hi: float = 4.0
    ) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        if not 0.0 < lo <= 1.0 <= hi:
            raise ValueError(f"need 0 < lo <= 1 <= hi, got lo={lo} hi={hi}")
        self.enabled = enabled
        self.alpha = alpha
        self.lo = lo
        self.hi = hi
        self._factors: dict[tuple[str, str], float] = dict.fromkeys(PHASES, 1.0)
        self._var: dict[tuple[str, str], float] = dict.fromkeys(PHASES, 0.0)

    def factor(self, mode: str, phase: str) -> float:
        return self._factors.get((mode, phase), 1.0)

    def margin(self, mode: str, phase: str, z: float = 2.0) -> float:
        """Planning safety factor (>= 1) learned from the spread of measured / predicted."""
        var = self._var.get((mode, phase), 0.0)
        if var <= 0.0:
            return 1.0
        return 1.0 + z * math.sqrt(var) / self.factor(mode, phase)

    def factors(self) -> dict[str, float]:
        """Snapshot for logs: ``{"mode/phase": factor}``."""
        return {f"{m}/{p}": f for (m, p), f in self._factors.items()}

    def update(self, mode: str, phase: str, measured_s: float, raw_predicted_s: float) -> None:
        """Fold one observation in. Ignored when disabled or when either time is not a positive
        finite number (e.g. an empty phase predicted 0)."""
        if not self.enabled:
            return
        if not (measured_s > 0.0 and raw_predicted_s > 0.0):
            return
        if not (math.isfinite(measured_s) and math.isfinite(raw_predicted_s)):
            return
        ratio = min(max(measured_s / raw_predicted_s, self.lo), self.hi)
        key = (mode, phase)
        old = self._factors.get(key, 1.0)
        new = (1.0 - self.alpha) * old + self.alpha * ratio
        self._factors[key] = min(max(new, self.lo), self.hi)
        dev = ratio - old
        self._var[key] = (1.0 - self.alpha) * self._var.get(key, 0.0) + self.alpha * dev * dev

    def reset(self) -> None:
        for key in self._factors:
            self._factors[key] = 1.0
        for key in self._var:
            self._var[key] = 0.0
