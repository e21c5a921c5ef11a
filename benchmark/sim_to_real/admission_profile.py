"""The CPU profiles the admission benchmark's predictions run on (`admission.py`): the
committed one of `benchmark/results/sim_to_real/`, that one slowed by what the run's own log
shows, and one refitted to that log."""

from __future__ import annotations

import os


def profile_paths(profile_dir: str, calibration: str) -> tuple[str, str, str]:
    """(model config, hardware, calibration) JSON paths of a committed CPU profile."""
    return (os.path.join(profile_dir, "cpu_model.json"),
            os.path.join(profile_dir, "cpu_hardware.json"),
            os.path.join(profile_dir, calibration))


def measured_slowdown(profile_dir: str, calibration: str, stock: bool, log: str
                      ) -> dict | None:
    """How much slower than its committed profile the server ran in this run: the periods its
    SGLang log implies (`sglang_log.log_samples`), summed, over what the profile predicts for
    the same batches. On this shared machine other jobs slow a one-thread forward both by
    taking its core and by sharing caches and memory bandwidth (runs of one server have
    differed twofold at equal core wait), which a simulator of a dedicated machine cannot
    know; this one number carries it. None without a log or logged periods."""
    from benchmark.sim_to_real.sglang_log import log_samples
    from sglang_duet.latency import Calibration, LatencyModel, get_hardware
    from sglang_duet.latency.model import ModelSpec

    if not os.path.exists(log):
        return None
    model, hw, cal = profile_paths(profile_dir, calibration)
    with open(log, errors="replace") as f:
        samples = log_samples(f.read(), hw, model, True, overlap=stock)
    if not samples:
        return None
    lm = LatencyModel(get_hardware(hw), ModelSpec.from_hf_config(model), Calibration.load(cal))
    pred = sum(lm.predict(s.batch).total_s for s in samples)
    return {"slowdown": round(sum(s.seconds for s in samples) / pred, 4),
            "iterations": len(samples)}


def contended_profile(profile_dir: str, calibration: str, slowdown: float, out_dir: str,
                      name: str) -> tuple[str, str]:
    """The profile slowed `slowdown` times (`measured_slowdown`): peaks divided by it, host
    seconds times it, so every predicted time is `slowdown` times the committed one. Returns
    the (hardware, calibration) JSON paths written to `out_dir`."""
    from dataclasses import replace

    from sglang_duet.latency import Calibration, get_hardware
    from sglang_duet.latency.calibration import HOST_FIELDS
    from sglang_duet.latency.hardware import save_hardware

    if not slowdown > 0:
        raise ValueError(f"slowdown {slowdown} must be > 0")
    _, hw, cal = profile_paths(profile_dir, calibration)
    spec = get_hardware(hw)
    hw_out = os.path.join(out_dir, f"{name}_contended_hardware.json")
    save_hardware(replace(spec, flops=spec.flops / slowdown, hbm_bw=spec.hbm_bw / slowdown),
                  hw_out)
    base = Calibration.load(cal)
    cal_out = os.path.join(out_dir, f"{name}_contended_calibration.json")
    replace(base, **{k: getattr(base, k) * slowdown for k in HOST_FIELDS}).save(cal_out)
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
