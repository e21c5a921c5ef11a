"""How much two phases on disjoint SM partitions slow each other, from published measurements.

SM partitions (green contexts, libsmctrl, MPS) isolate compute units only. The decode on S_d SMs
and the prefill on the rest still share the L2, the memory controllers and HBM, and one power
limit, hence one clock. `contention.py` caps their combined HBM traffic at what the device can
deliver; that cap rarely binds, yet published co-runs slow down well below it. This module adds
that slowdown. Each side is first predicted alone on its partition (t_d, t_p seconds), the cap
gives cap(t_d), cap(t_p) (`combine`), and then

    decode:   t_d' = cap(t_d) + min(A * x_p, M) * min(g_d, t_p),  x_p = F_p / (t_p - i_p) / F_cap
    prefill:  t_p' = cap(t_p) + B * u_d * t_p,                    u_d = B_d / g_d / BW_cap

g_d = t_d - h_d is the decode step's GPU time (less its host seconds h_d, `Breakdown.host_s`:
launches and syncs are not slowed by the neighbour), F_p the prefill's FLOPs, i_p its all-reduce
and host seconds (`comm_s + host_s`), B_d the decode's HBM bytes; F_cap = peak FLOP/s times the
best compute efficiency of any operator class, BW_cap = the bandwidth cap of `contention.py`
(B/s). So x_p is the share of the device's achievable tensor throughput the prefill keeps busy
while it computes (its compute intensity times its SM share; counted without its TP all-reduces,
so that it means the same at TP 1 and TP 8) and u_d the share of achievable HBM bandwidth the
decode draws while it runs, both in [0, ~1]. A decode step is slowed while it overlaps the
prefill (all of it, unless the prefill is the shorter); the prefill is slowed all along, since the
decode's steps run back to back for as long as it runs (duet's look-ahead, pdmux's free-running
loop). A = `clock` + `decode_memory`:

* `clock`: a memory-bound decode on few SMs is limited by how fast its SMs issue loads, so it runs
  at the clock of its power-limited GEMM neighbour. A 8192^3 bf16 GEMM on an A100 at its 400 W
  limit runs at 257 TFLOP/s on random data and 295 TFLOP/s on zeros (H. He, "Strangely, Matrix
  Multiplications on GPUs Run Faster When Given 'Predictable' Data!", thonking.ai): the
  power limit costs it 295/257 - 1 = 14.8% of its time. No H100 figure was read; the same
  0.148 per unit of x_p is used for every GPU.
* `decode_memory`: the rest of the decode slowdown (L2 and memory-controller queueing), fitted so
  that the largest modelled decode slowdown over MuxWise's profiling grid matches its reported
  maximum: "a maximum of 20% on A100 GPUs and 30% on H100 GPUs" (Chen, Cui et al., "Towards
  High-Goodput LLM Serving with Prefill-decode Multiplexing", ASPLOS '26, sec. 3.3.1, Fig. 11;
  Llama-8B / Llama-70B, 8 GPUs, GreenContext partitions of 16 SMs, decode on 12-76 SMs of an
  A100 or 20-100 of an H100, prefill contexts 1K-128K, decode contexts 1K-1024K). A is fitted
  with no ceiling; M (`decode_max`) is that published maximum: no measurement says how far the
  slowdown grows beyond the heaviest prefill MuxWise ran, so the model stops at what was measured.

B (`prefill_bandwidth`): a large GEMM (Llama's up-gated projection) next to a memory-copy kernel
on the other SMs "exhibits marginal performance degradation (<8%) when using more than 60% SMs"
(Lin et al., "Bullet", ASPLOS '26, sec. 3.2.3, Fig. 10): B is set so that a prefill next to a
memory copy on 40% of the SMs (u_d = the modelled bandwidth share of that copy) slows by 8%.

The pressures come from the alone times and the slowdown adds to the cap's result, so "published"
is never faster than "none" on either side (where both saturate HBM the two add: conservative).

The fit, its residuals and every published point next to the model are in
`benchmark/latency_model/interference/` (README.md; `python -m benchmark.latency_model.interference`
prints them).
H200 (the H100's GH100 die, same 700 W) uses the H100 figures; devices without a published figure
(the CPU profile) get none. `slowdown` on arrays performs the same operations as on floats, so the
menu-wide table equals the scalar path bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .hardware import HardwareSpec

__all__ = ["DEFAULT_INTERFERENCE", "INTERFERENCE_NAMES", "PUBLISHED", "Interference",
           "resolve_interference", "slowdown"]


@dataclass(frozen=True)
class Interference:
    """Slowdown coefficients of one GPU (dimensionless, per unit of the neighbour's pressure)."""

    clock: float  # decode: power-limited clock of the GEMM neighbour, per unit of x_p
    decode_memory: float  # decode: L2 / memory-controller queueing, per unit of x_p
    decode_max: float  # M: ceiling of the decode's slowdown (a fraction of its time)
    prefill_bandwidth: float  # prefill: per unit of u_d, the decode's HBM bandwidth share

    def __post_init__(self) -> None:
        if min(self.clock, self.decode_memory, self.decode_max, self.prefill_bandwidth) < 0:
            raise ValueError("interference coefficients must be >= 0")

    @property
    def decode(self) -> float:
        """A: the decode's slowdown per unit of the prefill's compute share x_p."""
        return self.clock + self.decode_memory


CLOCK = 295.0 / 257.0 - 1.0  # He: A100 GEMM time lost to the power limit

# decode_memory and prefill_bandwidth: the fit `python -m benchmark.latency_model.interference`
# prints (test/benchmark/latency_model/test_interference_fit.py holds them to it).
_HOPPER = Interference(CLOCK, 0.2771, 0.30, 0.0964)
PUBLISHED: dict[str, Interference] = {
    "h100-sxm": _HOPPER,
    "h200": _HOPPER,
    "a100-80g": Interference(CLOCK, 0.1030, 0.20, 0.0964),
}

INTERFERENCE_NAMES = ("published", "none")
DEFAULT_INTERFERENCE = "published"  # what the simulator and the runtime's policy use


def resolve_interference(spec: str | Interference | None, hardware: HardwareSpec
                         ) -> Interference | None:
    """The coefficients `spec` names for `hardware` (None: no interference beyond the cap)."""
    if spec is None or isinstance(spec, Interference):
        return spec
    if spec == "none":
        return None
    if spec == "published":
        return PUBLISHED.get(hardware.name)
    raise ValueError(f"unknown interference {spec!r}; accepted: {', '.join(INTERFERENCE_NAMES)}")


def slowdown(k_d: float, m: float, k_p: float, t_d, t_p, h_d: float, i_p: float):
    """(t_d' - cap(t_d), t_p' - cap(t_p)) of the module docstring, seconds, from the alone times
    (floats or arrays, all > 0), the decode's host seconds ``h_d`` and the prefill's all-reduce +
    host seconds ``i_p``. ``k_d = A * F_p / F_cap`` and ``k_p = B * B_d / BW_cap`` are seconds,
    ``m`` is M: ``A * x_p = k_d / (t_p - i_p)`` and ``B * u_d * t_p = k_p * t_p / g_d``. Floats
    and arrays go through the same operations (``min`` selects, it does not round), so the two
    agree bit for bit."""
    low = np.minimum if isinstance(t_d, np.ndarray) else min
    g_d = t_d - h_d
    return low(k_d / (t_p - i_p), m) * low(g_d, t_p), k_p * (t_p / g_d)
