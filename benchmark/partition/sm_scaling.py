"""Copy bandwidth and bf16 matmul throughput vs. SMs in a green-context partition.

Reproduces the shape of DuetServe's Figure 3a (about 60% of peak bandwidth from 20% of the SMs,
compute about linear in SMs) on the local GPU. For every size the green-ctx backend can make
(plus the whole device), it runs on the partition's stream:
  - an elementwise copy kernel (`torch.add(src, 1, out=dst)`: SMs move the bytes; counted as
    bytes read + bytes written),
  - an N x N x N bf16 matmul (cuBLAS), counted as 2 N^3 FLOP.
Writes <out>/sm_scaling.json and <out>/sm_scaling.png. Needs a CUDA GPU with green contexts;
elsewhere it exits with a message. About 1-2 minutes on one H200.

    python -m benchmark.partition.sm_scaling --out benchmark/results/gpu
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, fields

from benchmark.stamp import write_result


@dataclass(frozen=True)
class BenchArgs:
    out: str = "benchmark/results/gpu"
    device: int = 0
    copy_mib: int = 1024  # size of the source buffer (MiB); the copy moves twice that
    matmul_n: int = 8192
    target_s: float = 0.1  # wall time per timed repetition
    repeats: int = 5
    step: int = 0  # SMs between sizes; 0 = the driver's split granularity
    seed: int = 0

    @staticmethod
    def add_cli_args(p: argparse.ArgumentParser) -> None:
        for f in fields(BenchArgs):
            p.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)

    @classmethod
    def from_cli_args(cls, ns: argparse.Namespace) -> BenchArgs:
        return cls(**{f.name: getattr(ns, f.name) for f in fields(cls)})


def _why_not_here(device: int) -> str | None:
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    from sglang_duet.partition.green_ctx import GreenCtxBackend

    ok, why = GreenCtxBackend().available(device)
    return None if ok else f"green contexts unavailable: {why}"


def _time_op(op, stream, target_s: float, repeats: int) -> float:
    """Median seconds per call of `op` enqueued on `stream` (host timing around a full sync)."""
    import torch

    with torch.cuda.stream(stream):
        op()
        stream.synchronize()
        t0 = time.perf_counter()
        op()
        stream.synchronize()
        once = max(time.perf_counter() - t0, 1e-6)
        n = max(1, min(1000, int(target_s / once)))
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(n):
                op()
            stream.synchronize()
            samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def _measure(stream, bufs, args: BenchArgs) -> dict[str, float]:
    import torch

    src, dst, a, b, c = bufs
    copy_s = _time_op(lambda: torch.add(src, 1, out=dst), stream, args.target_s, args.repeats)
    mm_s = _time_op(lambda: torch.matmul(a, b, out=c), stream, args.target_s, args.repeats)
    return {
        "copy_s": copy_s,
        "copy_bytes_per_s": 2 * src.numel() * src.element_size() / copy_s,
        "matmul_s": mm_s,
        "matmul_flop_per_s": 2 * args.matmul_n**3 / mm_s,
    }


def run(args: BenchArgs) -> dict:
    import torch

    import sgl_duet_kernel as k

    torch.manual_seed(args.seed)
    dev = torch.device("cuda", args.device)
    props = torch.cuda.get_device_properties(dev)
    total = props.multi_processor_count
    gran = k.green_granularity(args.device)
    sizes = scaling_sizes(total, gran.min_sms, args.step or gran.align_sms)
    n = args.matmul_n
    # Random data (zeros can run faster than real data on matrix units).
    src = torch.rand(args.copy_mib << 18, device=dev)  # float32: 4 bytes each
    dst = torch.empty_like(src)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    bufs = (src, dst, a, b, c)
    torch.cuda.synchronize()

    full = _measure(torch.cuda.current_stream(dev), bufs, args)
    rows, refused = [], []
    for sms in sizes:
        try:
            pair = k.GreenPair(args.device, sms, 1)
        except k.GrantError as exc:  # a size the split rounds past the device: skip, recorded
            refused.append({"sms": sms, "error": str(exc)})
            print(f"{sms:4d} SMs  refused: {exc}", flush=True)
            continue
        with pair:
            stream = torch.cuda.ExternalStream(pair.decode_stream, device=dev)
            m = _measure(stream, bufs, args)
            stream.synchronize()
            rows.append({"sms": pair.decode_sms, **m})
        print(
            f"{rows[-1]['sms']:4d} SMs  copy {m['copy_bytes_per_s'] / 1e12:6.2f} TB/s "
            f"({m['copy_bytes_per_s'] / full['copy_bytes_per_s']:5.1%})  "
            f"matmul {m['matmul_flop_per_s'] / 1e12:7.1f} TFLOP/s "
            f"({m['matmul_flop_per_s'] / full['matmul_flop_per_s']:5.1%})",
            flush=True,
        )
    rows.append({"sms": total, "whole_device": True, **full})
    for r in rows:
        r["sm_fraction"] = r["sms"] / total
        r["copy_fraction"] = r["copy_bytes_per_s"] / full["copy_bytes_per_s"]
        r["matmul_fraction"] = r["matmul_flop_per_s"] / full["matmul_flop_per_s"]
    return {
        "config": asdict(args),
        "device": {
            "name": props.name,
            "num_sms": total,
            "cc": [props.major, props.minor],
            "driver_cuda": k.driver_version(),
            "torch": torch.__version__,
            "granularity": gran._asdict(),
        },
        "rows": rows,
        "refused": refused,
    }


def scaling_sizes(total_sms: int, min_sms: int, step_sms: int) -> list[int]:
    """Partition sizes to measure: every size the split can make that leaves the rest of the
    device at least one split's minimum, so none rounds past `total_sms` (SMs)."""
    from sglang_duet.partition.sizes import Granularity, decode_sizes

    return list(decode_sizes(total_sms, Granularity(min_sms, step_sms), 0, min_sms))


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    x = [100 * r["sm_fraction"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(x, [100 * r["copy_fraction"] for r in rows], "o-", label="copy bandwidth")
    ax.plot(x, [100 * r["matmul_fraction"] for r in rows], "s-", label="bf16 matmul")
    ax.plot([0, 100], [0, 100], ":", color="gray", label="linear")
    ax.set_xlabel("SMs in partition (% of device)")
    ax.set_ylabel("% of whole-device throughput")
    ax.set_title(f"{result['device']['name']}: throughput vs. SM partition")
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    BenchArgs.add_cli_args(p)
    args = BenchArgs.from_cli_args(p.parse_args(argv))
    why = _why_not_here(args.device)
    if why:
        print(
            f"sm_scaling: cannot run here: {why}. It needs a CUDA GPU with green contexts "
            "(driver >= 12.4, sm_90+).",
            file=sys.stderr,
        )
        return 2
    os.makedirs(args.out, exist_ok=True)
    result = run(args)
    write_result(os.path.join(args.out, "sm_scaling.json"), result)
    try:
        plot(result, os.path.join(args.out, "sm_scaling.png"))
    except ImportError as exc:
        print(f"sm_scaling: no PNG ({exc})", file=sys.stderr)
    print(f"wrote {args.out}/sm_scaling.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
