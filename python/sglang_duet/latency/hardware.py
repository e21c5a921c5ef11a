"""GPU profiles: peak rates plus how compute and HBM bandwidth scale with the SMs a kernel gets."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class HardwareSpec:
    """One GPU SKU. Units: FLOP/s, B/s, bytes, SMs.

    `compute(sms)` and `bandwidth(sms)` describe what a kernel confined to `sms` SMs can reach at
    100% efficiency; per-operator efficiencies live in `Calibration`. SM counts are first
    quantised down to whole TPCs (the granularity of every partition backend), never below one.

    Bandwidth curve: a normalised Hill function of the SM fraction f,
    ``g(f) = (1 + k^n) f^n / (f^n + k^n)`` with g(1) = 1. With n > 1 it rises super-linearly at
    small f and saturates well before f = 1, the shape measured with cudaMemcpy-style kernels on
    partitioned H100s (DuetServe Fig. 3a: ~60% of peak with 20% of the SMs).
    """

    name: str
    num_sms: int
    sms_per_tpc: int
    flops: float  # dense bf16 tensor-core FLOP/s
    hbm_bw: float  # B/s
    hbm_bytes: int
    link_bw: float  # intra-node B/s per direction (NVLink)
    bw_knee: float  # k: SM fraction at which g = (1 + k^n) / 2, i.e. about half of peak
    bw_hill: float  # n: steepness of the curve (>1 means super-linear start)

    def __post_init__(self) -> None:
        if self.num_sms <= 0 or self.sms_per_tpc <= 0 or self.num_sms % self.sms_per_tpc:
            raise ValueError(f"{self.name}: num_sms must be a positive multiple of sms_per_tpc")
        if min(self.flops, self.hbm_bw, self.link_bw) <= 0 or self.hbm_bytes <= 0:
            raise ValueError(f"{self.name}: rates and capacity must be positive")
        if not (0.0 < self.bw_knee < 1.0) or self.bw_hill <= 0:
            raise ValueError(f"{self.name}: need 0 < bw_knee < 1 and bw_hill > 0")

    def usable_sms(self, sms: int | None = None) -> int:
        """SMs a partition of `sms` really gets: whole TPCs, at least one, at most the device."""
        if sms is None:
            return self.num_sms
        if sms < 1:
            raise ValueError(f"sms must be >= 1, got {sms}")
        if sms > self.num_sms:
            raise ValueError(f"{self.name} has {self.num_sms} SMs, asked for {sms}")
        return max(self.sms_per_tpc, (int(sms) // self.sms_per_tpc) * self.sms_per_tpc)

    def compute(self, sms: int | None = None) -> float:
        """Dense bf16 FLOP/s available to `sms` SMs: linear in whole TPCs."""
        return self.flops * self.usable_sms(sms) / self.num_sms

    def bandwidth_fraction(self, sms: int | None = None) -> float:
        """Fraction of peak HBM bandwidth reachable by `sms` SMs (1.0 for the whole device)."""
        return bandwidth_curve(self.usable_sms(sms) / self.num_sms, self.bw_knee, self.bw_hill)

    def bandwidth(self, sms: int | None = None) -> float:
        """HBM B/s reachable by `sms` SMs."""
        return self.hbm_bw * self.bandwidth_fraction(sms)

    def with_curve(self, knee: float, hill: float) -> HardwareSpec:
        return replace(self, bw_knee=knee, bw_hill=hill)


def bandwidth_curve(frac: float, knee: float, hill: float) -> float:
    """Normalised Hill curve g(frac); g(0) = 0, g(1) = 1, increasing."""
    if frac <= 0.0:
        return 0.0
    kn = knee**hill
    fn = frac**hill
    return (1.0 + kn) * fn / (fn + kn)


def knee_for(frac: float, reach: float, hill: float) -> float:
    """The knee k that makes g(frac) == reach for a given hill exponent (closed form)."""
    if not (0.0 < frac < 1.0 and frac < reach < 1.0):
        raise ValueError("need 0 < frac < reach < 1")
    fn = frac**hill
    return math.pow(fn * (1.0 - reach) / (reach - fn), 1.0 / hill)


# Curve shape: DuetServe Fig. 3a (H100 SXM, TPC-granular partitions, cudaMemcpy microbenchmark):
# ~60% of peak HBM bandwidth with 20% of the SMs, then saturating. A Hill exponent of 1.5 keeps
# every partition's bandwidth share above its SM share (one TPC already gets ~3%) with a convex
# start up to ~8 SMs; the knee is solved so that g(0.2) = 0.6 exactly (k ~= 0.17).
# A100 and H200 have no published partitioned-bandwidth curve; they reuse the H100 shape until a
# calibration refits it (Calibration.bw_knee / bw_hill).
_HILL = 1.5
_KNEE = knee_for(0.2, 0.6, _HILL)

# Fields: name, SMs, SMs per TPC, FLOP/s, HBM B/s, HBM bytes, NVLink B/s per direction, curve.
HARDWARE: dict[str, HardwareSpec] = {
    # NVIDIA H100 SXM5 datasheet: 989 TFLOP/s dense BF16 tensor (1979 with sparsity), 3.35 TB/s
    # HBM3, 80 GB, 132 SMs (66 TPCs of 2 SMs), NVLink 4 900 GB/s bidirectional = 450 GB/s each way.
    "h100-sxm": HardwareSpec("h100-sxm", 132, 2, 989e12, 3.35e12, 80 * 10**9, 450e9, _KNEE, _HILL),
    # NVIDIA H200 SXM datasheet: same GH100 compute as H100 SXM (989 TFLOP/s dense BF16, 132
    # SMs), 4.8 TB/s HBM3e, 141 GB, NVLink 4 at 450 GB/s per direction.
    "h200": HardwareSpec("h200", 132, 2, 989e12, 4.8e12, 141 * 10**9, 450e9, _KNEE, _HILL),
    # NVIDIA A100 80GB SXM datasheet: 312 TFLOP/s dense BF16, 2.039 TB/s HBM2e, 80 GB, 108 SMs
    # (54 TPCs), NVLink 3 600 GB/s bidirectional = 300 GB/s each way.
    "a100-80g": HardwareSpec("a100-80g", 108, 2, 312e12, 2.039e12, 80 * 10**9, 300e9, _KNEE,
                             _HILL),
}


# Short names people type (and `python -m sglang_duet.partition --hardware` takes) -> profile.
HARDWARE_ALIASES: dict[str, str] = {"h100": "h100-sxm", "a100": "a100-80g"}


def save_hardware(spec: HardwareSpec, path: str | os.PathLike) -> None:
    """Write `spec` as JSON (its fields), for `get_hardware(path)` to read back."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(asdict(spec), indent=2) + "\n")


def get_hardware(name: str | os.PathLike) -> HardwareSpec:
    """Built-in profile by name or alias, or a profile JSON written by `save_hardware` (e.g. a
    measured CPU, benchmark/sim_to_real); ValueError naming the accepted names otherwise."""
    key = os.fspath(name)
    spec = HARDWARE.get(HARDWARE_ALIASES.get(key, key))
    if spec is not None:
        return spec
    if key.endswith(".json") and os.path.isfile(key):
        with open(key, encoding="utf-8") as f:
            data = json.load(f)
        try:
            return HardwareSpec(**data)
        except TypeError as e:
            raise ValueError(f"{key}: not a hardware profile ({e})") from None
    raise ValueError(
        f"unknown hardware {key!r}; accepted: {', '.join(sorted(HARDWARE))} or a profile JSON"
    )
