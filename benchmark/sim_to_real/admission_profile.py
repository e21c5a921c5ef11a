"""The CPU profiles the admission benchmark's predictions run on (`admission.py`): the
committed one of `benchmark/results/sim_to_real/`, that one on a core the server got only part
of, and one refitted to the run's own log."""

from __future__ import annotations

import os


def profile_paths(profile_dir: str, calibration: str) -> tuple[str, str, str]:
    """(model config, hardware, calibration) JSON paths of a committed CPU profile."""
    return (os.path.join(profile_dir, "cpu_model.json"),
            os.path.join(profile_dir, "cpu_hardware.json"),
            os.path.join(profile_dir, calibration))


def contended_profile(profile_dir: str, calibration: str, wait_share: float, out_dir: str,
                      name: str) -> tuple[str, str]:
    """The profile on a core the server gets only ``1 - wait_share`` of (the share of the run
    its server waited for a core, `cpu_meter.CpuMeter`): peaks times that share, host seconds
    over it, so every predicted time is divided by ``1 - wait_share``. Returns the (hardware,
    calibration) JSON paths written to `out_dir`. The simulator models a dedicated machine; on
    this shared one the server's measured wait is the one fact of the run it lacks."""
    from dataclasses import replace

    from sglang_duet.latency import Calibration, get_hardware
    from sglang_duet.latency.calibration import HOST_FIELDS
    from sglang_duet.latency.hardware import save_hardware

    if not 0.0 <= wait_share < 1.0:
        raise ValueError(f"wait share {wait_share} outside [0, 1)")
    keep = 1.0 - wait_share
    _, hw, cal = profile_paths(profile_dir, calibration)
    spec = get_hardware(hw)
    hw_out = os.path.join(out_dir, f"{name}_contended_hardware.json")
    save_hardware(replace(spec, flops=spec.flops * keep, hbm_bw=spec.hbm_bw * keep), hw_out)
    base = Calibration.load(cal)
    cal_out = os.path.join(out_dir, f"{name}_contended_calibration.json")
    replace(base, **{k: getattr(base, k) / keep for k in HOST_FIELDS}).save(cal_out)
    return hw_out, cal_out


def refit(profile_dir: str, calibration: str, stock: bool, log: str, out: str) -> dict | None:
    """A profile fitted again to the loop periods the server's log of this run shows
    (`sglang_log.log_samples`, `profile.fit_profile`; SGLang logs whole seconds, so on a
    shared machine this is a rough fit): `profile.fit_profile`'s summary (the calibration's
    path, its held-out error), or None when there is no log or too few periods."""
    from benchmark.sim_to_real.profile import fit_profile
    from benchmark.sim_to_real.sglang_log import log_samples

    if not os.path.exists(log):
        return None
    model, hw, _ = profile_paths(profile_dir, calibration)
    with open(log, errors="replace") as f:
        samples = log_samples(f.read(), hw, model, True, overlap=stock)
    try:
        return fit_profile(samples, out)
    except ValueError:
        return None
