"""Measure forward-iteration latency of Qwen3-8B-shaped layers on a GPU, for calibration.

    PYTHONPATH=python python -m benchmark.latency_model.profile_gpu --out samples.csv  # GPU machine
    python -m sglang_duet.calibrate --samples samples.csv --out C.json

(from the repository root; PYTHONPATH=python where sglang_duet is not installed, as on the GPU
machine)

torch only: random bf16 weights with Qwen3-8B's shapes (36 layers, GQA, q/k norm, RoPE, SiLU MLP,
LM head on each request's last row), attention through torch's scaled_dot_product_attention
(FlashAttention backend where it applies), KV held per layer in dense [n, kv_heads, len, d]
buffers. Batches: prefill (q, c) and decode (n x c) grids; with an SM-partition backend
(sglang_duet.partition, sgl_duet_kernel) every batch is also run on partitions. A time budget
(default 420 s) stops the grid early, so one run stays under 8 minutes on an H200.
`--dry-run` writes the same CSV with timings predicted by the latency model (no torch needed).
The run notes go to the CSV's path with `.json` (benchmark.stamp.write_result: stamped).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmark.stamp import write_result
from sglang_duet.calibrate.samples import Sample, write_samples
from sglang_duet.latency import Batch, LatencyModel, ModelSpec, get_hardware, get_model

PREFILL_Q = (256, 1024, 2048, 4096, 8192)
PREFILL_C = (0, 4096, 16384)
DECODE_N = (1, 8, 32, 128)
DECODE_C = (1024, 4096, 16384, 32768)
MIXED = ("16x1@4096;1024@0", "64x1@2048;2048@2048")


@dataclass(frozen=True)
class Args:
    out: str = "samples.csv"
    hardware: str = "auto"  # auto: from the CUDA device name
    model: str = "qwen3-8b"
    warmup: int = 2
    repeats: int = 5
    budget_s: float = 420.0
    kv_budget_gb: float = 60.0  # skip batches whose KV cache would exceed this
    sms: str = "auto"  # partition sizes, comma-separated; "auto": 1/4, 1/2, 3/4 of the device
    cuda_graph: bool = True  # replay decode-only batches as CUDA graphs (as SGLang does)
    dry_run: bool = False
    seed: int = 0


def build_grid(model: ModelSpec, kv_budget_bytes: float) -> list[Batch]:
    """Batches to measure, smallest first, without those whose KV cache exceeds the budget."""
    from sglang_duet.calibrate.samples import parse_batch

    grid = [Batch.prefill(q, c) for c in PREFILL_C for q in PREFILL_Q]
    grid += [Batch.decode(n, c) for n in DECODE_N for c in DECODE_C]
    grid += [parse_batch(s) for s in MIXED]
    fits = [b for b in grid if b.kv_sum * model.kv_bytes_per_token <= kv_budget_bytes]
    return sorted(fits, key=lambda b: b.kv_sum + 4 * b.tokens)


def aggregate(times_s: list[float]) -> float:
    """One sample's seconds from repeated timings: the median (robust to a stray slow run)."""
    if not times_s:
        raise ValueError("no timings")
    return float(statistics.median(times_s))


def partition_sizes(spec: str, num_sms: int, sms_per_tpc: int) -> list[int | None]:
    if spec == "none":
        return [None]
    if spec == "auto":
        sizes = [num_sms // 4, num_sms // 2, 3 * num_sms // 4]
    else:
        sizes = [int(s) for s in spec.split(",") if s.strip()]
    return [None] + sorted({s - s % sms_per_tpc for s in sizes if 0 < s < num_sms})


def detect_hardware(device_name: str) -> str:
    name = device_name.upper()
    for key, hw in (("H200", "h200"), ("H100", "h100-sxm"), ("A100", "a100-80g")):
        if key in name:
            return hw
    raise SystemExit(f"unknown GPU {device_name!r}; pass --hardware h100-sxm|h200|a100-80g")


def run_grid(
    hardware: str,
    model_name: str,
    model: ModelSpec,
    grid: list[Batch],
    sms_list: list[int | None],
    measure: Callable[[Batch, int | None], list[float]],
    budget_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Sample]:
    """Measure every (batch, partition) until the budget runs out; one Sample each."""
    start = clock()
    for sms in sms_list:
        for batch in grid:
            if clock() - start > budget_s:
                print(f"time budget {budget_s:.0f} s reached; stopping", file=sys.stderr)
                return
            seconds = aggregate(measure(batch, sms))
            yield Sample(hardware, model_name, model.tp, sms, batch, seconds)


def fake_measure(hardware: str, model: ModelSpec, repeats: int
                 ) -> Callable[[Batch, int | None], list[float]]:
    """Timings the latency model predicts (for --dry-run and CPU tests)."""
    lm = LatencyModel(get_hardware(hardware), model)

    def measure(batch: Batch, sms: int | None) -> list[float]:
        t = lm.predict(batch, sms).total_s
        return [t * (1.0 + 0.01 * ((i % 3) - 1)) for i in range(repeats)]

    return measure


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for key, default in asdict(Args()).items():
        flag = f"--{key.replace('_', '-')}"
        if isinstance(default, bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        else:
            p.add_argument(flag, type=type(default), default=default)
    args = Args(**vars(p.parse_args(argv)))
    model = get_model(args.model)
    t0 = time.monotonic()
    if args.dry_run:
        hardware = "h200" if args.hardware == "auto" else args.hardware
        hw = get_hardware(hardware)
        measure = fake_measure(hardware, model, args.repeats)
        sms_list = partition_sizes(args.sms, hw.num_sms, hw.sms_per_tpc)
        note = "dry run: timings from the latency model"
    else:
        # torch stays out of --help and --dry-run
        from benchmark.latency_model.torch_forward import TorchRunner

        runner = TorchRunner(model, seed=args.seed, cuda_graph=args.cuda_graph)
        hardware = detect_hardware(runner.device_name) if args.hardware == "auto" \
            else args.hardware
        hw = get_hardware(hardware)
        sms_list, note = runner.partitions(partition_sizes(args.sms, hw.num_sms, hw.sms_per_tpc))
        measure = runner.measurer(args.warmup, args.repeats)
        note = f"{note}; {runner.sdpa_note}"
    grid = build_grid(model, args.kv_budget_gb * 1e9)
    samples = list(run_grid(hardware, args.model, model, grid, sms_list, measure, args.budget_s))
    n = write_samples(args.out, samples)
    meta = {"args": asdict(args), "hardware": hardware, "rows": n, "partitions": sms_list,
            "note": note, "wall_s": time.monotonic() - t0}
    write_result(Path(args.out).with_suffix(".json"), meta)
    print(f"wrote {n} samples to {args.out} in {meta['wall_s']:.1f} s ({note})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
