"""The interference fit: each published point (points.csv) as a quantity of the model.

* MuxWise's maxima (`mux-a100`, `mux-h100`) fix A = clock + decode_memory per GPU: the largest
  modelled decode slowdown over MuxWise's profiling grid (`mux_grid`), with no ceiling, must match
  the published maximum, least squares over its two models (Llama-8B and Llama-70B, TP 8); the
  ceiling M is that maximum.
* Bullet's bound (`bul-gemm`) fixes B: a GEMM next to a memory copy on 40% of the SMs slows by 8%.
* `clock` is He's power-limit figure (`he-power`), taken as it is.

A slowdown here is t_concurrent / t_alone - 1 with `LatencyModel.predict_concurrent` (interference
and the bandwidth cap both applied). Numpy only; about a second of CPU.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np

from sglang_duet.latency import Batch, Calibration, LatencyModel, ModelSpec, get_hardware, get_model
from sglang_duet.latency.interference import CLOCK, PUBLISHED, Interference

POINTS = Path(__file__).resolve().parent / "points.csv"
# meta-llama/Llama-3.1-70B config.json: 80 layers, hidden 8192, 64 q / 8 KV heads of 128,
# MLP 28672, vocab 128256, untied embeddings (MuxWise's "Llama-70B")
LLAMA_70B = ModelSpec("llama-3.1-70b", 80, 8192, 64, 8, 128, 28672, 128256, False, 2)
MUX_TP = 8  # "For MuxWise, we fix the tensor parallelism degree to 8"
# Fig. 11's x-axes (decode SMs; the prefill gets the rest), 16-SM steps
MUX_DECODE_SMS = {"a100-80g": (12, 28, 44, 60, 76), "h100-sxm": (20, 36, 52, 68, 84, 100)}
K = 1024
PREFILL_NEW = (1 * K, 2 * K, 8 * K, 32 * K, 128 * K)  # "total context ... 1,024 to 128K"
PREFILL_REUSED = (0, 2 * K, 8 * K, 32 * K)
DECODE_BS = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # "around 20 batch sizes" of SOTA frameworks
DECODE_CTX = (1 * K, 2 * K, 8 * K, 32 * K, 128 * K)  # per request; batch total <= 1024K
BULLET_COPY_SHARE = 0.4  # "more than 60% SMs" for the GEMM: the copy on the other 40%


def points() -> list[dict[str, str]]:
    with open(POINTS, encoding="utf-8") as f:
        return list(csv.DictReader(f))


def published(pid: str) -> float:
    return float(next(p for p in points() if p["id"] == pid)["published"])


def mux_models() -> dict[str, ModelSpec]:
    return {"llama-8b": get_model("llama-3.1-8b", MUX_TP), "llama-70b": LLAMA_70B.sharded(MUX_TP)}


def mux_batches() -> tuple[list[Batch], list[Batch]]:
    """(prefill batches, decode batches) of MuxWise's grid."""
    pre = [Batch([n], [r]) for n in PREFILL_NEW for r in PREFILL_REUSED if n + r <= 128 * K]
    dec = [Batch.decode(bs, c) for bs in DECODE_BS for c in DECODE_CTX if bs * c <= 1024 * K]
    return pre, dec


def mux_grid(lm: LatencyModel, decode_sms: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(decode, prefill) slowdowns over the grid: one row per (prefill, decode) pair, one column
    per decode partition of `decode_sms`."""
    total = lm.hardware.num_sms
    sms_p = tuple(total - s for s in decode_sms)
    pre, dec = mux_batches()
    s_d, s_p = [], []
    for pb in pre:
        for db in dec:
            tab = lm.predict_concurrent_table(db, pb, decode_sms, sms_p)
            s_d.append(tab.decode_s / tab.decode_alone_s - 1.0)
            s_p.append(tab.prefill_s / tab.prefill_alone_s - 1.0)
    return np.array(s_d), np.array(s_p)


def copy_share(hardware: str, share: float = BULLET_COPY_SHARE) -> float:
    """u_d of a memory copy on `share` of the SMs: the bandwidth it reaches alone on them (the
    curve of hardware.py, DuetServe Fig. 3a), as a share of all the device's bandwidth."""
    hw = get_hardware(hardware)
    return hw.bandwidth_fraction(max(1, int(share * hw.num_sms)))


def _lm(hardware: str, model: ModelSpec, cal: Calibration, inter: Interference | None):
    return LatencyModel(get_hardware(hardware), model, cal, inter)


def _max_decode(hardware: str, cal: Calibration, inter: Interference) -> dict[str, float]:
    sms = MUX_DECODE_SMS[hardware]
    return {name: float(mux_grid(_lm(hardware, m, cal, inter), sms)[0].max())
            for name, m in mux_models().items()}


def fit_decode(hardware: str, target: float, cal: Calibration, b: float) -> float:
    """decode_memory minimising the squared error of the two models' maximum slowdowns. Without
    a ceiling the slowdown is A * x_p * overlap (the cap of contention.py does not bind on this
    grid), linear in A: the least-squares A is closed-form from the maxima at A = 1."""
    unit = _max_decode(hardware, cal, Interference(CLOCK, 1.0 - CLOCK, float("inf"), b))
    x = np.array(list(unit.values()))
    return float(target * x.sum() / (x * x).sum()) - CLOCK


def fit(cal: Calibration) -> dict[str, Interference]:
    """Coefficients of every GPU with a published figure (H200 takes the H100's)."""
    b = published("bul-gemm") / copy_share("a100-80g")
    out = {}
    for hw, pid in (("a100-80g", "mux-a100"), ("h100-sxm", "mux-h100")):
        m = published(pid)
        out[hw] = Interference(CLOCK, fit_decode(hw, m, cal, b), m, b)
    a100, h100 = out["a100-80g"], out["h100-sxm"]
    return {"h100-sxm": h100, "h200": h100, "a100-80g": a100}


def rounded(inter: Interference, digits: int = 4) -> Interference:
    return replace(inter, decode_memory=round(inter.decode_memory, digits),
                   prefill_bandwidth=round(inter.prefill_bandwidth, digits))


def library_matches_fit(cal: Calibration, rel: float = 0.02) -> list[str]:
    """Names of the GPUs whose `PUBLISHED` coefficients are off the fit by more than `rel`."""
    off = []
    for hw, got in fit(cal).items():
        lib = PUBLISHED[hw]
        for key in ("decode_memory", "decode_max", "prefill_bandwidth"):
            want, have = getattr(got, key), getattr(lib, key)
            if abs(have - want) > rel * abs(want):
                off.append(f"{hw}.{key}: library {have:.4f}, fit {want:.4f}")
    return off
