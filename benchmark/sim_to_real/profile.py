"""The CPU profile the simulator runs with: a HardwareSpec of this machine's cores and a
Calibration fitted (`sglang_duet.calibrate.fit.fit_efficiencies`) to the iterations the
sglang-duet server measured on the same model (`samples.plan_log_samples`).

The profile's peaks are nominal, the fit supplies the efficiencies and the host terms:
* FLOP/s: 2 AMD Zen 2 cores (this machine: EPYC family 23 model 49, AVX2 + FMA, 2.25 GHz base
  per lscpu's BogoMIPS 4491) x 2 FMA pipes x 8 fp32 lanes x 2 FLOP x 2.25e9 = 144 GFLOP/s. The
  servers run one OpenMP thread (`real.SERVER_ENV`), so a GEMM's fitted efficiency stays <= 0.5.
* memory: 25.6 GB/s, one DDR4-3200 channel (8 B x 3.2 GT/s); a one-thread copy measured
  ~9 GB/s and a cached GEMV ~13 GB/s here, both under it.
* 16 "SMs" in TPCs of 2, the runtime's CPU stand-in (`runtime/components.py`, CPU_PROFILE):
  only spatial plans look at SMs, and none of the compared systems makes one.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from sglang_duet.calibrate.fit import fit_efficiencies, kfold_predictions, relative_errors
from sglang_duet.calibrate.samples import Sample
from sglang_duet.latency import Calibration, HardwareSpec, get_hardware
from sglang_duet.latency.hardware import save_hardware

CPU = HardwareSpec(
    name="cpu-2x-zen2", num_sms=16, sms_per_tpc=2, flops=144e9, hbm_bw=25.6e9,
    hbm_bytes=24 * 10**9, link_bw=10e9, bw_knee=get_hardware("h100-sxm").bw_knee,
    bw_hill=get_hardware("h100-sxm").bw_hill,
)
# The bandwidth curve and the all-reduce are not exercised (whole device, TP 1); graph replays do
# not exist on the CPU (decode runs eagerly): its prior is kept, the per-iteration term fits it.
KEEP = ("graph_replay_s", "allreduce_latency_s")


def write_hardware(path: str | Path) -> str:
    save_hardware(CPU, path)
    return str(path)


def fit_profile(samples: list[Sample], out: str | Path, kfold: int = 5) -> dict:
    """Fit on every sample, write the calibration JSON; held-out error by k-fold."""
    if len(samples) < kfold:
        raise ValueError(f"only {len(samples)} measured iterations to fit")
    cal = fit_efficiencies(samples, Calibration(), fit_curve=False, name="cpu-sim-to-real",
                           keep=KEEP)
    measured = np.array([s.seconds for s in samples])
    pred = kfold_predictions(samples, kfold, Calibration(), keep=KEEP)
    err = np.abs(pred - measured) / measured
    cal = replace(cal, heldout_mape=float(err.mean()), heldout_p90=float(np.percentile(err, 90)))
    cal.save(out)
    decode = np.array([s.batch.n_decode == s.batch.tokens for s in samples])
    host = host_share(samples, cal)
    return {
        "calibration": str(out), "samples": len(samples),
        "train_mape": round(float(relative_errors(samples, cal).mean()), 4),
        "kfold": kfold, "heldout_mape": round(float(err.mean()), 4),
        "heldout_p90": round(float(np.percentile(err, 90)), 4),
        "host_share_decode_median": _med(host[decode]),
        "host_share_extend_median": _med(host[~decode]),
        "values": {k: v for k, v in cal.to_dict().items() if isinstance(v, float)},
    }


def host_share(samples: list[Sample], cal: Calibration) -> np.ndarray:
    """Per sample, the fitted host seconds over the predicted total."""
    from sglang_duet.latency import LatencyModel
    from sglang_duet.latency.model import resolve_model

    if not samples:
        return np.zeros(0)
    lm = LatencyModel(get_hardware(samples[0].hardware), resolve_model(samples[0].model, 1), cal)
    out = []
    for s in samples:
        b = lm.predict(s.batch)
        out.append(b.host_s / b.total_s if b.total_s else 0.0)
    return np.array(out)


def _med(x: np.ndarray) -> float | None:
    return round(float(np.median(x)), 4) if x.size else None
