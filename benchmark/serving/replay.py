"""Run `sglang.bench_serving` on a converted trace file (`python -m benchmark.serving.replay`).

    python -m benchmark.serving.replay --replay-file REQS.jsonl [--trace-timestamps] \
        -- [any sglang.bench_serving flags]

bench_serving 0.5.17 cannot replay per-request input/output lengths or arrival times from a file
(its `custom` dataset re-tokenizes text and uses one output length; its timestamp replay is wired
to the Mooncake dataset only). This wrapper runs bench_serving's own CLI (`cli_main`) unchanged and
hooks two functions of `sglang.benchmark.serving` for this process only:
* `get_dataset` returns the file's requests (exact prompt_len / output_len, ignore_eos is the
  bench_serving default), so sampling, warm-up, streaming, metrics and the JSONL output are all
  bench_serving's;
* with `--trace-timestamps`, `get_request` replays each request's `timestamp_ms` instead of
  drawing Poisson gaps (bench_serving's own trace-timestamp branch).
"""

from __future__ import annotations

import argparse
import sys

from benchmark.serving.convert import read_jsonl


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "--" in argv:
        cut = argv.index("--")
        ours, bench = argv[:cut], argv[cut + 1:]
    else:
        ours, bench = argv, []
    p = argparse.ArgumentParser(prog="python -m benchmark.serving.replay")
    p.add_argument("--replay-file", required=True)
    p.add_argument("--trace-timestamps", action="store_true")
    a = p.parse_args(ours)

    import sglang.benchmark.serving as serving
    from sglang.benchmark.datasets import DatasetRow

    reqs = read_jsonl(a.replay_file)

    def get_dataset(args, tokenizer, model_id=None):
        rows = [DatasetRow(prompt=r.prompt, prompt_len=r.prompt_len, output_len=r.output_len,
                           timestamp=r.timestamp_ms) for r in reqs]
        return rows[: args.num_prompts] if args.num_prompts else rows

    serving.get_dataset = get_dataset
    if a.trace_timestamps:
        if any(r.timestamp_ms is None for r in reqs):
            p.error("--trace-timestamps needs timestamp_ms on every request")
        original = serving.get_request

        def get_request(input_requests, request_rate, *args, **kwargs):
            return original(input_requests, request_rate, use_trace_timestamps=True)

        serving.get_request = get_request
    sys.argv = ["sglang.bench_serving", *bench]
    serving.cli_main()


if __name__ == "__main__":
    main()
