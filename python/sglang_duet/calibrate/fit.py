"""Least-squares calibration of efficiency factors (and the bandwidth curve) from samples.

The prediction is piecewise linear in the inverse efficiencies: once it is known which side of
each operator's max() binds, it is linear. `fit_efficiencies` alternates between fixing those
sides and solving a relative-error least-squares problem until the sides stop changing. The
bandwidth curve (knee, hill) enters non-linearly and is fitted by a grid plus golden-section
refinement around that inner solve. Parameters no sample exercises (contributing < 1% of every
sample's time) keep their prior value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..latency.calibration import Calibration
from .features import N_INV, PARAMS, Features, build_features
from .samples import Sample

_INV_BOUNDS = (1.0, 100.0)  # efficiencies between 1% and 100% of the datasheet peak
_EXCITED = 0.01


@dataclass(frozen=True)
class FitResult:
    calibration: Calibration
    train_mape: float
    heldout_mape: float | None
    heldout_p90: float | None
    n_train: int
    n_heldout: int


def _solve(feat: Features, inv_g: np.ndarray, x0: np.ndarray, fit_overhead: bool,
           pinned: np.ndarray, iters: int = 40) -> tuple[np.ndarray, float]:
    """Inner active-set iteration for a fixed bandwidth curve; returns (x, loss)."""
    x = x0.copy()
    n, k = feat.n, len(PARAMS)
    y = feat.seconds
    u_b = feat.u_b * inv_g
    prev = None
    for _ in range(iters):
        on_compute = feat.u_f * x[2 * feat.cls] >= u_b * x[2 * feat.cls + 1]
        col = np.where(on_compute, 2 * feat.cls, 2 * feat.cls + 1)
        val = np.where(on_compute, feat.u_f, u_b)
        a = np.bincount(feat.row * k + col, weights=val, minlength=n * k).reshape(n, k)
        a[:, N_INV - 1:] = feat.fixed
        a /= y[:, None]  # relative error
        contrib = np.abs(a * x[None, :]).max(axis=0)
        free = contrib > _EXCITED
        free[N_INV] = False  # all-reduce latency: collinear with the overhead; keep the prior
        free[N_INV + 1] = fit_overhead  # per-iteration host seconds
        free[N_INV + 2] = fit_overhead and bool(feat.fixed[:, 3].any())  # eager launch per layer
        free[N_INV + 3] = False  # graph replay: collinear with the iteration cost; the prior
        free[N_INV + 4] = fit_overhead  # per sampling row
        free[pinned] = False
        x = _bounded_lstsq(a, np.ones(n), x, free)
        if prev is not None and np.array_equal(prev, on_compute):
            break
        prev = on_compute
    pred = feat.predict(x, inv_g)
    return x, float(np.sum(((pred - y) / y) ** 2))


def _bounded_lstsq(a: np.ndarray, rhs: np.ndarray, x: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Least squares over the free columns within the parameters' bounds (scipy's BVLS)."""
    from scipy.optimize import lsq_linear

    x = x.copy()
    if not free.any():
        return x
    n_sec = len(PARAMS) - N_INV
    lo = np.array([_INV_BOUNDS[0]] * N_INV + [0.0] * n_sec)[free]
    hi = np.array([_INV_BOUNDS[1]] * N_INV + [math.inf] * n_sec)[free]
    r = rhs - a[:, ~free] @ x[~free]
    x[free] = lsq_linear(a[:, free], r, bounds=(lo, hi), method="bvls").x
    return x


def fit_efficiencies(
    samples: Sequence[Sample],
    prior: Calibration | None = None,
    fit_curve: bool | None = None,
    fit_overhead: bool = True,
    name: str = "fitted",
    keep: tuple[str, ...] = (),
) -> Calibration:
    """Calibration fitted to `samples`. `fit_curve=None`: fit the bandwidth curve only when some
    sample ran on a partition (fewer SMs than the device). `keep`: parameters (`PARAMS` names)
    held at the prior, e.g. one the samples exercise outside the range they cover."""
    unknown = sorted(set(keep) - set(PARAMS))
    if unknown:
        raise ValueError(f"unknown parameters {unknown}; accepted: {', '.join(PARAMS)}")
    pinned = np.array([p in keep for p in PARAMS])
    prior = prior if prior is not None else Calibration()
    feat = build_features(samples)
    hw = feat.hardware
    knee = prior.bw_knee if prior.bw_knee is not None else hw.bw_knee
    hill = prior.bw_hill if prior.bw_hill is not None else hw.bw_hill
    if fit_curve is None:
        fit_curve = bool((feat.frac < 1.0).any())
    x0 = feat.to_vector(prior)

    def loss_at(kn: float, hl: float) -> tuple[float, np.ndarray]:
        x, loss = _solve(feat, feat.curve(kn, hl), x0, fit_overhead, pinned)
        return loss, x

    if fit_curve:
        best = min(((loss_at(kn, hl), kn, hl) for hl in (1.0, 1.5, 2.0, 2.5, 3.0, 4.0)
                    for kn in np.geomspace(0.03, 0.6, 14)), key=lambda t: t[0][0])
        (_, x), knee, hill = best
        for _ in range(3):  # coordinate-wise golden-section refinement
            knee = _golden(lambda v, h=hill: loss_at(v, h)[0], knee / 1.5, min(knee * 1.5, 0.95))
            hill = _golden(lambda v, k=knee: loss_at(k, v)[0], max(hill - 0.75, 0.5), hill + 0.75)
        _, x = loss_at(knee, hill)
        curve = {"bw_knee": float(knee), "bw_hill": float(hill)}
    else:
        _, x = loss_at(knee, hill)
        curve = {"bw_knee": prior.bw_knee, "bw_hill": prior.bw_hill}
    values = {p: float(1.0 / x[i]) for i, p in enumerate(PARAMS[:N_INV])}
    values.update({p: float(x[i]) for i, p in enumerate(PARAMS) if i >= N_INV})
    return replace(prior, name=name, hardware=hw.name, n_samples=len(samples), **values, **curve)


def _golden(f, lo: float, hi: float, iters: int = 24) -> float:
    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2.0


def predict_samples(samples: Sequence[Sample], cal: Calibration) -> np.ndarray:
    """Per sample, the seconds `cal` predicts for it."""
    feat = build_features(samples)
    knee = cal.bw_knee if cal.bw_knee is not None else feat.hardware.bw_knee
    hill = cal.bw_hill if cal.bw_hill is not None else feat.hardware.bw_hill
    return feat.predict(feat.to_vector(cal), feat.curve(knee, hill))


def relative_errors(samples: Sequence[Sample], cal: Calibration) -> np.ndarray:
    """|predicted - measured| / measured per sample."""
    measured = np.array([s.seconds for s in samples])
    return np.abs(predict_samples(samples, cal) - measured) / measured


def kfold_predictions(samples: Sequence[Sample], k: int, prior: Calibration | None = None,
                      seed: int = 0, keep: tuple[str, ...] = ()) -> np.ndarray:
    """Per sample, what a calibration fitted on the other folds predicts for it (k folds of a
    seeded shuffle): every figure is out of sample."""
    n = len(samples)
    if not 2 <= k <= n:
        raise ValueError(f"k-fold needs 2 <= k <= {n} samples, got k={k}")
    folds = np.array_split(np.random.default_rng(seed).permutation(n), k)
    pred = np.empty(n)
    for fold in folds:
        held = set(fold.tolist())
        cal = fit_efficiencies([s for i, s in enumerate(samples) if i not in held], prior,
                               keep=keep)
        pred[fold] = predict_samples([samples[i] for i in fold], cal)
    return pred


def split_samples(samples: Sequence[Sample], holdout_every: int = 5
                  ) -> tuple[list[Sample], list[Sample]]:
    """(train, held-out): the CSV's `split` column when present, else every n-th row held out."""
    if any(s.split for s in samples):
        return [s for s in samples if s.split != "test"], [s for s in samples if s.split == "test"]
    train = [s for i, s in enumerate(samples) if i % holdout_every != holdout_every - 1]
    test = [s for i, s in enumerate(samples) if i % holdout_every == holdout_every - 1]
    return train, test


def calibrate(samples: Sequence[Sample], prior: Calibration | None = None, name: str = "fitted",
              holdout_every: int = 5, keep: tuple[str, ...] = ()) -> FitResult:
    """Fit on the training rows, report errors on the held-out rows."""
    train, test = split_samples(samples, holdout_every)
    if not train:
        raise ValueError("no training samples")
    cal = fit_efficiencies(train, prior, name=name, keep=keep)
    train_err = relative_errors(train, cal)
    mape = p90 = None
    if test:
        err = relative_errors(test, cal)
        mape, p90 = float(err.mean()), float(np.percentile(err, 90))
    cal = replace(cal, heldout_mape=mape, heldout_p90=p90, n_samples=len(train))
    return FitResult(cal, float(train_err.mean()), mape, p90, len(train), len(test))


def calibrate_kfold(samples: Sequence[Sample], k: int, prior: Calibration | None = None,
                    name: str = "fitted", seed: int = 0, keep: tuple[str, ...] = ()
                    ) -> FitResult:
    """Fit on every sample; the held-out errors come from `kfold_predictions`."""
    cal = fit_efficiencies(samples, prior, name=name, keep=keep)
    measured = np.array([s.seconds for s in samples])
    err = np.abs(kfold_predictions(samples, k, prior, seed, keep) - measured) / measured
    mape, p90 = float(err.mean()), float(np.percentile(err, 90))
    cal = replace(cal, heldout_mape=mape, heldout_p90=p90)
    return FitResult(cal, float(relative_errors(samples, cal).mean()), mape, p90, len(samples),
                     len(samples))
