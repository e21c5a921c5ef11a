"""python -m benchmark.serving --trace NAME --qps Q[,Q...] --systems A,B,... [options]"""

from __future__ import annotations

import argparse
import sys

from benchmark.serving.compare import RESULTS_DIR, Config, compare
from benchmark.serving.convert import ARRIVALS
from benchmark.serving.systems import SYSTEMS, parse_systems
from benchmark.serving.traces import TRACES
from sglang_duet.local_server import cuda_available

CPU_DEFAULT_SCALE = 0.1  # the embedded tiny model has a 4096-token context


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmark.serving", description=__doc__)
    p.add_argument("--trace", required=True, choices=sorted(TRACES))
    p.add_argument("--qps", required=True, help="comma-separated request rates, e.g. 1,2,4")
    p.add_argument("--systems", default="sglang-chunked,sglang-default,sglang-pdmux,duet",
                   help=f"comma-separated, from {','.join(SYSTEMS)}")
    p.add_argument("--model", default=None,
                   help="model dir (with tokenizer); default on CPU: the embedded tiny model")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--scale", type=float, default=None,
                   help=f"length scale (default {CPU_DEFAULT_SCALE} on CPU, 1 on GPU)")
    p.add_argument("--output-scale", type=float, default=None,
                   help="scale for output lengths only (default: --scale)")
    p.add_argument("--num-requests", type=int, default=50)
    p.add_argument("--sample", choices=["uniform", "first"], default="uniform")
    p.add_argument("--arrival", choices=list(ARRIVALS), default="poisson",
                   help="Poisson at each QPS (bench_serving's draw, or poisson-replay: drawn "
                   "here, sent as timestamps), or the trace's own gaps rescaled to each QPS")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chunked-prefill-size", type=int, default=None,
                   help="for sglang-chunked and duet (default 256 on CPU, SGLang's on GPU)")
    p.add_argument("--load-format", default=None,
                   help="passed to every server; default 'dummy' on a GPU (random weights)")
    p.add_argument("--server-args", default="", help="extra flags for every server, one string")
    p.add_argument("--ttft-slo-ms", type=float, default=None,
                   help="default 2000 on CPU, 1000 on GPU")
    p.add_argument("--tbt-slo-ms", type=float, default=100.0)
    p.add_argument("--no-warmup-pass", action="store_true",
                   help="skip the unmeasured bench_serving pass each server gets first")
    p.add_argument("--tag", default="")
    p.add_argument("--out-dir", default=RESULTS_DIR)
    p.add_argument("--work-dir", default=None, help="server logs and raw bench_serving output")
    return p.parse_args(argv)


def config_from_args(a: argparse.Namespace) -> Config:
    gpu = cuda_available()
    model = a.model
    if model is None:
        if gpu:
            raise SystemExit("--model is required on a GPU machine")
        from sglang_duet.tiny_model import default_model_path

        model = str(default_model_path())
    server_args = a.server_args.split()
    load_format = a.load_format or ("dummy" if gpu else None)
    if load_format:
        server_args += ["--load-format", load_format]
    return Config(
        trace=a.trace, qps=[float(q) for q in a.qps.split(",") if q.strip()],
        systems=parse_systems(a.systems), model=model, num_requests=a.num_requests,
        scale=a.scale if a.scale is not None else (1.0 if gpu else CPU_DEFAULT_SCALE),
        output_scale=a.output_scale, sample=a.sample, arrival=a.arrival, seed=a.seed, tp=a.tp,
        chunked_prefill_size=a.chunked_prefill_size or (None if gpu else 256),
        server_args=server_args,
        ttft_slo_ms=a.ttft_slo_ms or (1000.0 if gpu else 2000.0), tbt_slo_ms=a.tbt_slo_ms,
        tag=a.tag, out_dir=a.out_dir, warmup_pass=not a.no_warmup_pass,
    )


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    results = compare(config_from_args(a), work=a.work_dir)
    print("\n".join(f"[serving] wrote {p}" for p in results["outputs"]))
    ran = [e for e in results["systems"].values() if e["status"] == "ran"]
    return 0 if ran and all(r["summary"] for e in ran for r in e["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
