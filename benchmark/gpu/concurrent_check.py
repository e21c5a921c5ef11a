"""Decode and prefill on two partition streams at once vs. the latency model's prediction.

For 2-3 decode sizes S_d of the partition menu (green contexts; nearest to --fractions of the
device), torch-only Qwen3-8B-shaped layers with random bf16 weights run
  - a decode step (--decode-requests x 1 token, --decode-context cached) alone on the decode
    stream, a prefill chunk (--prefill-tokens) alone on the prefill stream, then
  - both at once: decode launched first on its stream, prefill on the other, both held behind
    one gate so they start together; CUDA events on each stream; median of --repeats.
Each is compared with LatencyModel(hardware, model with --layers layers).predict /
predict_concurrent for the same shapes: predicted vs measured ms and the relative error
(pred - meas) / meas, alone and concurrent, plus decode's slowdown under concurrency.

Only --layers of the model's layers run (default 4 of 36, plus the LM head) so it stays short;
the model predicts for the same reduced model, so the comparison is like for like. The full-model
figures scale each measurement by the model's full / reduced prediction (an estimate, not a
measurement). Without a usable partition backend it times each workload alone on the whole
device, one after the other (mode "sequential-whole-device", reason recorded), and makes no
concurrent comparison. Steps replay as CUDA graphs captured on the stream they run on (a graph
captured elsewhere would not keep to the partition); eager if capture fails.

Writes <out>/concurrent_check.json, prints a table. About a minute on an H100 or H200. Needs a
CUDA device: elsewhere it exits with status 2 (--dry-run fills the timings from the latency model).

    PYTHONPATH=python python -m benchmark.gpu.concurrent_check --out "${OUT:-benchmark/results/gpu}"

from the repository root (PYTHONPATH=python where sglang_duet is not installed; check.sh sets
it). The JSON is written by benchmark.stamp.write_result (commit, date, machine, command).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from benchmark.gpu.concurrent_model import (
    build_report,
    fake_measurements,
    format_table,
    parse_list,
    pick_sizes,
    reduced_model,
    workload_batches,
)
from benchmark.stamp import ROOT, write_result
from sglang_duet.latency import (
    Calibration,
    LatencyModel,
    get_hardware,
    get_model,
)

RESULT_FILE = "concurrent_check.json"
DEVICE_ONLY = Calibration().without_host()  # kernels timed on their streams: no serving loop


@dataclass(frozen=True)
class CheckArgs:
    out: str = ""  # "" = ${OUT:-benchmark/results/gpu}
    model: str = "qwen3-8b"
    hardware: str = "auto"  # latency-model hardware; auto: from the CUDA device name
    layers: int = 4  # decoder layers actually run (the model's LM head runs too)
    decode_requests: int = 64
    decode_context: int = 4096
    prefill_tokens: int = 8192
    prefill_context: int = 0
    fractions: str = "0.25,0.5,0.75"  # decode sizes: menu entries nearest these shares of SMs
    sizes: str = ""  # explicit decode sizes (SMs), comma-separated; overrides --fractions
    backend: str = "green-ctx"  # partition backend (sglang_duet.partition names)
    warmup: int = 3
    repeats: int = 10
    gate_ms: float = 2.0  # GPU-side hold before a concurrent pair, so both start together
    cuda_graph: bool = True
    device: int = 0
    seed: int = 0
    dry_run: bool = False  # timings from the latency model (no GPU; exercises the report)
    # exit 1 unless both phases ran on partition streams: check.sh's question is whether GEMMs
    # and attention run on the split's remainder group (the prefill side), so a fall back to
    # the whole device must not pass
    strict: bool = False

    @staticmethod
    def parser() -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(description=__doc__,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        for f in fields(CheckArgs):
            flag = f"--{f.name.replace('_', '-')}"
            if isinstance(f.default, bool):
                p.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default)
            else:
                p.add_argument(flag, type=type(f.default), default=f.default)
        return p

    def out_dir(self) -> str:
        return self.out or os.environ.get("OUT") or str(ROOT / "benchmark/results/gpu")


def why_not_here(device: int = 0) -> str | None:
    """Why this machine cannot run the check (None: it can)."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    if device >= torch.cuda.device_count():
        return f"device {device} does not exist ({torch.cuda.device_count()} CUDA devices)"
    return None


def dry_run_measurements(args: CheckArgs, lm: LatencyModel, decode, prefill):
    """Setup and timings as a partitioned run on the model's hardware would give (no GPU)."""
    from sglang_duet.partition import PartitionMenu
    from sglang_duet.partition.sizes import green_ctx_table_granularity

    total = lm.hardware.num_sms
    menu = PartitionMenu.plan("green-ctx", total, green_ctx_table_granularity((9, 0)))
    sizes = choose_sizes(args, menu.decode_sizes, total)
    splits = [(s, menu.prefill_sms(s)) for s in sizes]
    setup = {"mode": "dry-run", "timing": "latency model (dry run)",
             "device": {"name": f"{lm.hardware.name} (planned, no GPU)", "num_sms": total},
             "partition": {"backend": "green-ctx (planned)", "reason": "dry run",
                           "menu": list(menu.decode_sizes), "fallback_reason": None}}
    return setup, fake_measurements(lm, decode, prefill, splits, args.repeats)


def choose_sizes(args: CheckArgs, available, total_sms: int) -> list[int]:
    if args.sizes:
        wanted = parse_list(args.sizes, int)
        missing = [s for s in wanted if s not in available]
        if missing:
            raise SystemExit(f"--sizes {missing} not in the menu {list(available)}")
        return sorted(set(wanted))
    return pick_sizes(available, total_sms, parse_list(args.fractions))


def main(argv: list[str] | None = None) -> int:
    args = CheckArgs(**vars(CheckArgs.parser().parse_args(argv)))
    if not args.dry_run:
        why = why_not_here(args.device)
        if why:
            print(f"concurrent_check: needs a CUDA device: {why}. Run it on a GPU machine "
                  "(benchmark/gpu/check.sh), or pass --dry-run.", file=sys.stderr)
            return 2
    t0 = time.monotonic()
    full = get_model(args.model)
    model = reduced_model(full, args.layers)
    decode, prefill = workload_batches(args.decode_requests, args.decode_context,
                                       args.prefill_tokens, args.prefill_context)
    if args.dry_run:
        hw_name = "h100-sxm" if args.hardware == "auto" else args.hardware
        lm = LatencyModel(get_hardware(hw_name), model, DEVICE_ONLY)
        setup, measured = dry_run_measurements(args, lm, decode, prefill)
    else:
        from benchmark.gpu.concurrent_torch import run_on_gpu  # torch stays out of the CPU path

        setup, measured, hw_name = run_on_gpu(args, model, decode, prefill, choose_sizes)
        lm = LatencyModel(get_hardware(hw_name), model, DEVICE_ONLY)
    lm_full = LatencyModel(lm.hardware, full, DEVICE_ONLY)
    report = build_report(setup, asdict(args), lm, lm_full, decode, prefill, measured)
    report["wall_s"] = time.monotonic() - t0
    out = Path(args.out_dir())
    write_result(out / RESULT_FILE, report)
    print(format_table(report))
    print(f"wrote {out / RESULT_FILE} in {report['wall_s']:.1f} s")
    return verdict(report, args.strict)


def verdict(report: dict, strict: bool) -> int:
    """Exit status: 1 when a split's measurement raised (an error on the remainder group
    included) or nothing was measured; with `strict`, also when no partition ran."""
    failed = [r["sms_decode"] for r in report["rows"] if r["error"]]
    if failed or not report["rows"]:
        print(f"concurrent_check: FAILED for S_d={failed or 'every split'}: "
              f"{[r['error'] for r in report['rows'] if r['error']]}", file=sys.stderr)
        return 1
    if strict and report.get("mode") != "partitioned":
        why = (report.get("partition") or {}).get("fallback_reason")
        print(f"concurrent_check: FAILED (--strict): no partition ran ({report.get('mode')}: "
              f"{why}), so nothing ran on a split's remainder group", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
