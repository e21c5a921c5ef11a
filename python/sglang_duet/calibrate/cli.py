"""`python -m sglang_duet.calibrate`: fit the latency model's factors to measured iterations."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..latency.calibration import Calibration
from ..latency.cli import Parser, UsageError
from .fit import calibrate, calibrate_kfold
from .published import read_published, usable
from .samples import Sample, read_samples


def published_samples(path: str, gpus: str | None) -> list[Sample]:
    rows = usable(read_published(path), tuple(gpus.split(",")) if gpus else None)
    if not rows:
        raise UsageError(f"no usable rows in {path} for --gpus {gpus}")
    return [r.sample() for r in rows]


def run(args: argparse.Namespace) -> int:
    if (args.samples is None) == (args.published is None):
        raise UsageError("give exactly one of --samples CSV or --published CSV")
    try:
        samples = (read_samples(args.samples) if args.samples
                   else published_samples(args.published, args.gpus))
        prior = Calibration.load(args.prior) if args.prior else None
        name = args.name or Path(args.out).stem
        keep = tuple(k for k in (args.keep or "").split(",") if k)
        if args.kfold:
            result = calibrate_kfold(samples, args.kfold, prior, name=name, keep=keep)
        else:
            result = calibrate(samples, prior, name=name, holdout_every=args.holdout_every,
                               keep=keep)
    except (ValueError, OSError) as e:
        raise UsageError(str(e).splitlines()[0]) from None
    result.calibration.save(args.out)
    cal = result.calibration
    effs = ", ".join(f"{k}={getattr(cal, k):.3f}" for k in Calibration.efficiency_names())
    print(f"fitted {result.n_train} samples -> {args.out}: {effs}")
    if cal.bw_knee is not None:
        print(f"bandwidth curve: knee={cal.bw_knee:.4f} hill={cal.bw_hill:.3f}")
    print(f"host: {cal.iteration_overhead_s * 1e6:.1f} us per pass, "
          f"{cal.request_overhead_s * 1e6:.1f} us per row, {cal.launch_layer_s * 1e6:.1f} us per "
          f"eager layer; train MAPE {result.train_mape:.2%}")
    if result.heldout_mape is None:
        print("held-out: no samples")
    else:
        print(f"held-out: n={result.n_heldout} MAPE={result.heldout_mape:.2%} "
              f"P90={result.heldout_p90:.2%}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    c = Parser(prog="python -m sglang_duet.calibrate", description=__doc__)
    c.add_argument("--samples", default=None, help="CSV (see sglang_duet.calibrate.samples)")
    c.add_argument("--published", default=None,
                   help="published-measurements CSV (see sglang_duet.calibrate.published)")
    c.add_argument("--gpus", default=None, help="with --published: comma-separated GPUs to "
                   "fit (default: every usable row)")
    c.add_argument("--kfold", type=int, default=0,
                   help="report the held-out error of K folds (and fit on every row)")
    c.add_argument("--keep", default=None, help="comma-separated parameters held at the prior "
                   "(e.g. attn_decode_bw when no sample reaches long contexts)")
    c.add_argument("--out", required=True, help="calibration JSON to write")
    c.add_argument("--name", default=None, help="calibration name (default: --out's stem)")
    c.add_argument("--prior", default=None, help="starting calibration (name or path)")
    c.add_argument("--holdout-every", type=int, default=5,
                   help="without a split column, hold out every n-th row (default 5)")
    return c


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(build_parser().parse_args(argv))
    except UsageError as e:
        print(f"python -m sglang_duet.calibrate: error: {e}", file=sys.stderr)
        return 2
