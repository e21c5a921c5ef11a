"""DuetServe's H100 measurements (Obs. 1-2, Fig. 1 and 3a) next to the uncalibrated model.

    PYTHONPATH=python python -m benchmark.latency_model.paper_observations

Prints a table and writes benchmark/results/latency_model/paper_observations.json (stamped).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass

from benchmark.stamp import ROOT, write_result
from sglang_duet.latency import (
    Batch,
    Calibration,
    LatencyModel,
    get_hardware,
    get_model,
)


@dataclass(frozen=True)
class Row:
    observation: str
    paper: str
    model: str
    holds: bool | None  # None: informational, no pass/fail


def _linear_knee(hw_name: str, cal: Calibration, k: int = 4096, n: int = 4096) -> int:
    """Tokens at which a k x n bf16 linear layer turns compute-bound in the roofline."""
    hw = get_hardware(hw_name)
    tokens = 1
    while True:
        f = 2.0 * tokens * k * n / (hw.flops * cal.gemm_compute)
        b = 2.0 * (k * n + tokens * (k + n)) / (hw.hbm_bw * cal.gemm_bw)
        if f >= b:
            return tokens
        tokens += 1


def observations(calibration: Calibration | None = None) -> list[Row]:
    cal = calibration or Calibration()
    h100 = get_hardware("h100-sxm")
    lm = LatencyModel(h100, get_model("qwen3-8b"), cal)
    pre = lm.predict(Batch.prefill(8192))
    d1 = lm.predict(Batch.decode(8, 1024)).total_s
    d32 = lm.predict(Batch.decode(8, 32768)).total_s
    share = pre.attention_s / pre.total_s
    bw20 = h100.bandwidth_fraction(round(0.2 * h100.num_sms))
    return [
        Row("Qwen3-8B, one 8192-token prefill, iteration (Obs. 1, Fig. 1b)", "> 180 ms",
            f"{pre.total_s * 1e3:.1f} ms", pre.total_s > 0.180),
        Row("  attention share of that iteration (Obs. 2, Fig. 1b)", "~25% (15-35%)",
            f"{share:.1%}", 0.15 < share < 0.35),
        Row("Qwen3-8B decode, 8 requests, ctx 1K -> 32K (Obs. 2, Fig. 1c)", "> 4x",
            f"{d32 / d1:.2f}x ({d1 * 1e3:.2f} -> {d32 * 1e3:.2f} ms)", d32 / d1 > 4.0),
        Row("H100 HBM bandwidth with 20% of the SMs (Fig. 3a)", "~60% of peak",
            f"{bw20:.1%}", abs(bw20 - 0.6) < 0.05),
        Row("4096x4096 linear: tokens to saturate, A100 / H100 (Fig. 1a)", "~2K / ~8K",
            f"{_linear_knee('a100-80g', cal)} / {_linear_knee('h100-sxm', cal)} (roofline "
            "ridge; GEMM efficiency is constant in T here)", None),
    ]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calibration", default=None, help="calibration name or JSON path")
    p.add_argument("--out", default=str(ROOT / "benchmark/results/latency_model/"
                                        "paper_observations.json"))
    args = p.parse_args(argv)
    cal = Calibration.load(args.calibration) if args.calibration else Calibration()
    rows = observations(cal)
    w = max(len(r.observation) for r in rows)
    print(f"{'observation':<{w}}  {'paper':<14}  {'model':<30}  holds")
    for r in rows:
        mark = "-" if r.holds is None else ("yes" if r.holds else "NO")
        print(f"{r.observation:<{w}}  {r.paper:<14}  {r.model:<30}  {mark}")
    write_result(args.out, {"calibration": cal.to_dict(), "rows": [asdict(r) for r in rows]})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
