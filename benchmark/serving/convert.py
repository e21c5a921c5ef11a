"""Turn a trace into the requests bench_serving replays (`python -m benchmark.serving.convert`).

Rules (also in README.md):
* sampling: `uniform` (default) picks N requests with `numpy.random.default_rng(seed).choice`
  without replacement, kept in trace order; `first` takes the first N.
* lengths: input and output are multiplied by `scale` and rounded (input >= 1, output >= 2 so
  every request has an inter-token gap); input is then clipped so input + output fits `max_len`.
* prompts: text built from vocabulary entries that are one space plus ASCII letters and encode back
  to themselves; a concatenation of such pieces tokenizes to exactly those tokens, so a prompt of
  n pieces is n tokens (checked for every prompt). Mooncake `hash_ids` become shared blocks: each
  id maps to one fixed block of round(512 * scale) pieces, so requests that share leading ids
  share that prompt prefix, as the radix cache expects.
* arrivals: `poisson` leaves timing to bench_serving (`--request-rate Q`, seeded); `trace` keeps
  the trace's gaps, rescaled so the sample's mean rate is Q (Mooncake's 3-second buckets then
  arrive as bursts); `poisson-replay` draws the Poisson times here with the simulator's rule
  (`sglang_duet.sim.arrivals.poisson_times`) and bench_serving sends them as timestamps, so a
  simulation of the same requests sees the same arrivals.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import asdict, dataclass

import numpy as np

from benchmark.serving.traces import MOONCAKE_BLOCK, TraceRequest, load_trace

ARRIVALS = ("poisson", "trace", "poisson-replay")
TIMESTAMPED = ("trace", "poisson-replay")  # sent at the file's timestamps (--trace-timestamps)


@dataclass(frozen=True)
class ReplayRequest:
    prompt: str
    prompt_len: int
    output_len: int
    timestamp_ms: float | None = None


def sample(reqs: list[TraceRequest], n: int, rule: str = "uniform",
           seed: int = 0) -> list[TraceRequest]:
    if n >= len(reqs):
        return list(reqs)
    if rule == "first":
        return list(reqs[:n])
    if rule != "uniform":
        raise ValueError(f"unknown sampling rule {rule!r}")
    idx = np.sort(np.random.default_rng(seed).choice(len(reqs), size=n, replace=False))
    return [reqs[i] for i in idx]


def scale_lengths(req: TraceRequest, scale: float, max_len: int | None) -> tuple[int, int, bool]:
    """(input, output, clipped) after scaling and fitting into max_len."""
    out = max(2, round(req.output_len * scale))
    inp = max(1, round(req.input_len * scale))
    if max_len is not None and inp + out > max_len:
        out = min(out, max_len // 2)
        return max(1, min(inp, max_len - out)), out, True
    return inp, out, False


def trace_arrivals_ms(reqs: list[TraceRequest], qps: float) -> list[float]:
    """Trace inter-arrival gaps, stretched or squeezed so the mean rate is qps."""
    t0 = reqs[0].arrival_s
    span = reqs[-1].arrival_s - t0
    if len(reqs) < 2 or span <= 0:
        return [1000.0 * i / qps for i in range(len(reqs))]
    factor = (len(reqs) - 1) / qps / span
    return [1000.0 * (r.arrival_s - t0) * factor for r in reqs]


class PromptBuilder:
    """Synthetic prompts of exact token counts for one tokenizer."""

    def __init__(self, tokenizer, seed: int = 0):
        self.tok = tokenizer
        self.seed = seed
        self.special = len(tokenizer.encode(""))  # tokens the tokenizer adds itself (BOS)
        pieces = []
        for text, tid in tokenizer.get_vocab().items():
            word = text[1:]
            if text.startswith("Ġ") and word.isascii() and word.isalpha():
                if tokenizer.encode(" " + word, add_special_tokens=False) == [tid]:
                    pieces.append(tid)
        if len(pieces) < 16:
            raise ValueError("tokenizer has too few ' word' tokens to build exact-length prompts")
        self.pieces = sorted(pieces)

    def _ids(self, rng: random.Random, n: int) -> list[int]:
        return [rng.choice(self.pieces) for _ in range(n)]

    def ids_for(self, n: int, key: int, hash_ids: tuple[int, ...] = (),
                block: int = 0) -> list[int]:
        n = max(0, n - self.special)
        if hash_ids and block > 0:
            ids: list[int] = []
            for h in hash_ids:
                if len(ids) >= n:
                    break
                ids += self._ids(random.Random(f"{self.seed}-block-{h}"), block)
            ids += self._ids(random.Random(f"{self.seed}-tail-{key}"), n - len(ids))
            return ids[:n]
        return self._ids(random.Random(f"{self.seed}-req-{key}"), n)

    def text(self, ids: list[int]) -> str:
        return self.tok.decode(ids)

    def count(self, text: str) -> int:
        return len(self.tok.encode(text))


def convert(reqs: list[TraceRequest], tokenizer, scale: float = 1.0, max_len: int | None = None,
            arrival: str = "poisson", qps: float | None = None, seed: int = 0,
            builder: PromptBuilder | None = None) -> tuple[list[ReplayRequest], dict]:
    builder = builder or PromptBuilder(tokenizer, seed)
    block = max(1, round(MOONCAKE_BLOCK * scale))
    stamps: list[float | None] = [None] * len(reqs)
    if arrival in TIMESTAMPED:
        if not qps:
            raise ValueError(f"arrival={arrival!r} needs a qps")
        if arrival == "trace":
            stamps = list(trace_arrivals_ms(reqs, qps))
        else:
            from sglang_duet.sim.arrivals import poisson_times

            stamps = [1000.0 * t for t in poisson_times(len(reqs), qps, seed).tolist()]
    elif arrival != "poisson":
        raise ValueError(f"unknown arrival {arrival!r}")
    out, clipped = [], 0
    for i, r in enumerate(reqs):
        n_in, n_out, cut = scale_lengths(r, scale, max_len)
        if r.hash_ids:  # keep the block structure inside the scaled prompt
            n_in = min(n_in, len(r.hash_ids) * block)
        clipped += cut
        text = builder.text(builder.ids_for(n_in, i, r.hash_ids, block))
        got = builder.count(text)
        if got != n_in:
            raise AssertionError(f"request {i}: prompt is {got} tokens, wanted {n_in}")
        out.append(ReplayRequest(text, n_in, n_out, stamps[i]))
    info = {
        "requests": len(out), "scale": scale, "max_len": max_len, "clipped": clipped,
        "arrival": arrival, "qps": qps, "seed": seed,
        "mean_input": float(np.mean([r.prompt_len for r in out])) if out else 0.0,
        "mean_output": float(np.mean([r.output_len for r in out])) if out else 0.0,
        "trace_mean_input": float(np.mean([r.input_len for r in reqs])) if reqs else 0.0,
        "trace_mean_output": float(np.mean([r.output_len for r in reqs])) if reqs else 0.0,
        "mooncake_block_tokens": block if any(r.hash_ids for r in reqs) else None,
    }
    return out, info


def write_jsonl(path: str, rows: list[ReplayRequest]) -> None:
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(asdict(r)) + "\n")


def read_jsonl(path: str) -> list[ReplayRequest]:
    with open(path) as f:
        return [ReplayRequest(**json.loads(line)) for line in f if line.strip()]


def model_max_len(model_path: str) -> int | None:
    try:
        with open(f"{model_path}/config.json") as f:
            return int(json.load(f)["max_position_embeddings"])
    except (OSError, KeyError, ValueError):
        return None


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmark.serving.convert", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", required=True)
    p.add_argument("--model", required=True, help="model dir whose tokenizer counts tokens")
    p.add_argument("--num-requests", type=int, default=100)
    p.add_argument("--sample", choices=["uniform", "first"], default="uniform")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--arrival", choices=list(ARRIVALS), default="poisson")
    p.add_argument("--qps", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(a.model)
    reqs = sample(load_trace(a.trace), a.num_requests, a.sample, a.seed)
    rows, info = convert(reqs, tok, a.scale, model_max_len(a.model), a.arrival, a.qps, a.seed)
    write_jsonl(a.out, rows)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
