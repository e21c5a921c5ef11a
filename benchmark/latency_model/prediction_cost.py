"""Cost of one LatencyModel prediction on the CPU (target: <= 30 us median for 256 requests).

    PYTHONPATH=python python -m benchmark.latency_model.prediction_cost [--requests 256]

A Batch keeps what a model derives from it, so predicting the same batch again (another SM
count) costs only the per-SM arithmetic; the ``*_fresh`` cases build a new batch every call
(what a scheduler pays once per iteration). ``*_menu`` cases score all 65 TPC-mask partitions of
an H100 in one vectorised call (``predict_concurrent_table``).

Writes benchmark/results/latency_model/prediction_cost.json (stamped: benchmark.stamp), with
numpy's version and the load average next to the timings.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import asdict, dataclass, fields

import numpy as np

from benchmark.stamp import ROOT, write_result
from sglang_duet.latency import Batch, LatencyModel, get_hardware, get_model


@dataclass(frozen=True)
class BenchArgs:
    requests: int = 256
    prefills: int = 8  # of the requests, how many are prefill chunks (the rest decode)
    calls: int = 5000
    seed: int = 0
    model: str = "qwen3-8b"
    hardware: str = "h100-sxm"
    out: str = str(ROOT / "benchmark/results/latency_model/prediction_cost.json")

    @staticmethod
    def add_cli_args(p: argparse.ArgumentParser) -> None:
        for f in fields(BenchArgs):
            p.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)

    @classmethod
    def from_cli_args(cls, ns: argparse.Namespace) -> BenchArgs:
        return cls(**{f.name: getattr(ns, f.name) for f in fields(cls)})


def _time(fn, calls: int) -> dict[str, float]:
    for _ in range(min(200, calls)):  # warm up (rate caches, allocator)
        fn()
    samples = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        t0 = clock()
        fn()
        samples.append(clock() - t0)
    samples.sort()
    return {
        "median_us": statistics.median(samples) / 1e3,
        "p10_us": samples[len(samples) // 10] / 1e3,
        "p90_us": samples[len(samples) * 9 // 10] / 1e3,
        "min_us": samples[0] / 1e3,
    }


def run(args: BenchArgs) -> dict[str, object]:
    rng = np.random.default_rng(args.seed)
    n_dec = args.requests - args.prefills
    q = np.concatenate([np.ones(n_dec, np.int64), rng.integers(64, 2048, args.prefills)])
    c = rng.integers(0, 32768, args.requests)
    mixed = Batch(q, c)
    decode = Batch(np.ones(args.requests, np.int64), c)
    pairs = mixed.pairs()
    lm = LatencyModel(get_hardware(args.hardware), get_model(args.model))
    small = Batch(q[:32], c[:32])
    ctx = c.tolist()
    hw = lm.hardware
    menu = tuple(range(hw.sms_per_tpc, hw.num_sms, hw.sms_per_tpc))  # TPC masks: 2..130
    rest = tuple(hw.num_sms - s for s in menu)
    chunks = Batch(rng.integers(512, 4096, 2), np.zeros(2, np.int64))
    cases = {
        "predict_mixed_batch": lambda: lm.predict(mixed),
        "predict_decode_batch": lambda: lm.predict(decode),
        "predict_mixed_batch_66_sms": lambda: lm.predict(mixed, 66),
        "predict_from_pairs": lambda: lm.predict(pairs),  # includes building the Batch
        "predict_mixed_batch_fresh": lambda: lm.predict(Batch(q, c)),
        "predict_decode_batch_fresh": lambda: lm.predict(Batch.decode_steps(ctx)),
        "build_batch_from_arrays": lambda: Batch(q, c),
        "build_decode_batch_from_list": lambda: Batch.decode_steps(ctx),
        "predict_concurrent": lambda: lm.predict_concurrent(decode, small, 40, 92),
        "predict_concurrent_table_menu": lambda: lm.predict_concurrent_table(
            decode, chunks, menu, rest),
        "predict_concurrent_table_menu_fresh": lambda: lm.predict_concurrent_table(
            Batch.decode_steps(ctx), Batch([4096, 600], [0, 0]), menu, rest),
    }
    results = {name: _time(fn, args.calls) for name, fn in cases.items()}
    return {
        "config": {k: v for k, v in asdict(args).items() if k != "out"},  # no local path
        "target_us": 30.0,
        "headline": "predict_mixed_batch",
        "menu_entries": len(menu),
        "results": results,
        "env": {"numpy": np.__version__, "loadavg": os.getloadavg()},  # the rest: "stamp"
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    BenchArgs.add_cli_args(p)
    args = BenchArgs.from_cli_args(p.parse_args(argv))
    report = run(args)
    write_result(args.out, report)
    for name, r in report["results"].items():
        print(f"{name:<28} median {r['median_us']:7.2f} us  p10 {r['p10_us']:7.2f}  "
              f"p90 {r['p90_us']:7.2f}")
    print(f"loadavg {report['env']['loadavg']}; wrote {args.out}")
    print(f"(menu: {report['menu_entries']} partitions per *_menu call)")


if __name__ == "__main__":
    main()
