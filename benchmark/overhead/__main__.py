"""python -m benchmark.overhead: duet's loop overhead against stock SGLang, side by side.

Both servers serve the same model with the same scheduling flags: sglang-duet always runs with
--disable-overlap-schedule --enable-mixed-chunk (its loop needs them), so stock gets those too and
the same --chunked-prefill-size; duet runs --duet-mode aggregated, i.e. the same mixed batches as
stock, planned by duet. Each system is started, benchmarked with `python -m sglang.bench_serving`
(random-ids dataset, same seed and load) and stopped, alternating stock/duet for --rounds rounds
(A B A B by default), one server at a time; each server first gets an unmeasured warm-up
pass. The JSON under benchmark/results/overhead/ holds the config, every bench_serving result and
the output-throughput ratio duet/stock.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchmark.stamp import write_result
from sglang_duet.local_server import ROOT, Server, child_env, cuda_available

OUT_DIR = os.path.join(ROOT, "benchmark", "results", "overhead")
TARGET_LOSS = 0.03
# bench_serving fields kept per run (the per-request lists and server_info are dropped).
KEEP = (
    "completed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
    "input_throughput", "output_throughput", "total_throughput", "median_ttft_ms", "p99_ttft_ms",
    "median_itl_ms", "p99_itl_ms", "mean_tpot_ms", "median_e2e_latency_ms", "concurrency",
)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmark.overhead", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="default on CPU: the embedded tiny model")
    p.add_argument("--num-prompts", type=int, default=160)
    p.add_argument("--input-len", type=int, default=256)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--range-ratio", type=float, default=0.5)
    p.add_argument("--max-concurrency", type=int, default=32)
    p.add_argument("--request-rate", default="inf", help="inf = all at once (saturating load)")
    p.add_argument("--chunked-prefill-size", type=int, default=256)
    p.add_argument("--rounds", type=int, default=2, help="stock/duet pairs, alternating")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--warmup-prompts", type=int, default=32,
                   help="an unmeasured bench_serving pass of this many prompts first (0: none),"
                        " so first-use costs of new batch shapes are not measured")
    p.add_argument("--server-args", default="", help="extra flags for both servers")
    p.add_argument("--out", default=None, help="JSON path (default results/overhead/<device>.json)")
    return p.parse_args(argv)


def bench(a: argparse.Namespace, model: str, port: int, out_file: str, log,
          num_prompts: int | None = None) -> dict:
    cmd = [sys.executable, "-m", "sglang.bench_serving", "--backend", "sglang",
           "--host", "127.0.0.1", "--port", str(port), "--dataset-name", "random-ids",
           "--num-prompts", str(num_prompts or a.num_prompts),
           "--random-input-len", str(a.input_len),
           "--random-output-len", str(a.output_len), "--random-range-ratio", str(a.range_ratio),
           "--request-rate", a.request_rate, "--max-concurrency", str(a.max_concurrency),
           "--seed", str(a.seed), "--model", model, "--tokenizer", model,
           "--output-file", out_file, "--disable-tqdm", "--warmup-requests", "0"]
    flush_cache(port)
    subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env(), cwd=ROOT,
                   timeout=900, check=True)
    with open(out_file) as f:
        result = json.loads(f.read().strip().splitlines()[-1])
    return {k: result.get(k) for k in KEEP}


def flush_cache(port: int, timeout_s: float = 60.0, post=None) -> None:
    """Empty the server's radix cache before a pass, so no pass reuses an earlier one's
    prompts. SGLang refuses (HTTP 400) while a request still runs, and a request can outlive
    its finished HTTP response by an iteration; bench_serving's own --flush-cache posts once
    and then dies on that 400, so this retries (every 0.2 s, up to ``timeout_s`` seconds)."""
    import requests

    post = post or requests.post
    deadline = time.monotonic() + timeout_s
    while True:
        r = post(f"http://127.0.0.1:{port}/flush_cache", timeout=30)
        if r.status_code == 200:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"/flush_cache still answers {r.status_code} after {timeout_s} s")
        time.sleep(0.2)


def ratios(tput: dict[str, list[float]]) -> dict:
    """duet/stock output-throughput ratios: of the means, per round, and of the best runs.

    On a shared machine other jobs only ever slow a run down, so the best run of each system is
    the least disturbed estimate; all three are reported.
    """
    per_round = [d / s for s, d in zip(tput["stock"], tput["duet"], strict=True)]
    mean = statistics.mean(tput["duet"]) / statistics.mean(tput["stock"])
    return {
        "ratio_duet_over_stock": mean,
        "ratio_per_round": per_round,
        "ratio_median_of_rounds": statistics.median(per_round),
        "ratio_of_best_runs": max(tput["duet"]) / max(tput["stock"]),
        "throughput_loss": 1.0 - mean,
        "meets_target": 1.0 - mean <= TARGET_LOSS,
    }


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    gpu = cuda_available()
    model = a.model
    if model is None:
        from sglang_duet.tiny_model import default_model_path

        model = str(default_model_path())
    common = ["--model-path", model, "--chunked-prefill-size", str(a.chunked_prefill_size),
              "--enable-mixed-chunk", "--disable-overlap-schedule", *a.server_args.split()]
    systems = {"stock": (True, common), "duet": (False, [*common, "--duet-mode", "aggregated"])}
    work = tempfile.mkdtemp(prefix="duet_overhead_")
    runs: list[dict] = []
    for rnd in range(a.rounds):
        for name, (stock, args) in systems.items():
            srv = Server(list(args), stock=stock, log_path=os.path.join(work, f"{name}{rnd}.log"))
            t0 = time.time()
            try:
                srv.start()
                with open(os.path.join(work, f"bench_{name}{rnd}.log"), "w") as log:
                    if a.warmup_prompts:
                        bench(a, model, srv.port, os.path.join(work, f"warm_{name}{rnd}.jsonl"),
                              log, num_prompts=a.warmup_prompts)
                    res = bench(a, model, srv.port, os.path.join(work, f"{name}{rnd}.jsonl"), log)
            finally:
                srv.stop()
            runs.append({"system": name, "round": rnd, "command": " ".join(srv.command()[1:]),
                         "loadavg_1m_after": os.getloadavg()[0], "result": res})
            print(f"[overhead] round {rnd} {name}: {res['completed']}/{a.num_prompts} done, "
                  f"{res['output_throughput']:.1f} out tok/s [{time.time() - t0:.0f} s]",
                  flush=True)
    tput = {n: [r["result"]["output_throughput"] for r in runs if r["system"] == n]
            for n in systems}
    summary = ratios(tput)
    ratio, pairs = summary["ratio_duet_over_stock"], summary["ratio_per_round"]
    report = {
        "config": {
            **vars(a), "model": model, "device": "gpu" if gpu else "cpu",
            "dataset": "random-ids (sglang.bench_serving, seeded; no files, no network)",
            "same_schedule": True,
            "same_schedule_note": (
                "sglang-duet forces --disable-overlap-schedule --enable-mixed-chunk; stock runs "
                "with the same flags and the same --chunked-prefill-size, so the ratio measures "
                "duet's loop overhead, not a different schedule. duet: --duet-mode aggregated."),
            "order": "alternating stock, duet per round; one server at a time; each server gets"
                     " an unmeasured warm-up pass (--warmup-prompts) before the measured one",
        },
        "runs": runs,
        "output_throughput": tput,
        **summary,
        "target_max_loss": TARGET_LOSS,
        "work_dir": work,
    }
    out = a.out or os.path.join(OUT_DIR, f"{'gpu' if gpu else 'cpu'}.json")
    write_result(out, report)  # the machine (cores included) is in its "stamp"
    print(f"[overhead] duet/stock output throughput = {ratio:.4f} "
          f"(per round {', '.join(f'{p:.4f}' for p in pairs)}; best runs "
          f"{summary['ratio_of_best_runs']:.4f}); wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
