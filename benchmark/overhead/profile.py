"""Overhead by sampling: the share of the scheduler's time spent in sglang-duet's own code.

The side-by-side throughput comparison (`python -m benchmark.overhead`) is only as precise as the
machine is quiet. This measures the overhead directly instead: one sglang-duet server (aggregated
mode) under a saturating bench_serving load, its scheduler process sampled with py-spy, and every
sample charged to the innermost frame that is not the standard library: sglang-duet's own files
(`sglang_duet/...`) or anything else (SGLang, torch, ...).

    python -m benchmark.overhead.profile [--seconds 20] [--rate 100]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter

from benchmark.stamp import write_result
from sglang_duet.local_server import ROOT, Server, child_env, http_json

STDLIB = ("json/", "logging/", "dataclasses.py", "functools.py", "contextlib.py", "copy.py",
          "abc.py", "typing.py", "enum.py", "_collections_abc.py", "threading.py")
FRAME = re.compile(r"\(([^:()]+):\d+\)$")


def classify(raw_lines: list[str]) -> dict:
    """Charge each sample of the duet scheduler thread to duet's code or to the rest."""
    total, own = 0, 0
    where: Counter[str] = Counter()
    for line in raw_lines:
        stack, _, n = line.rstrip().rpartition(" ")
        if not stack or "sglang_duet/" not in stack:
            continue  # other threads of the process
        count = int(n)
        total += count
        for frame in reversed(stack.split(";")):
            m = FRAME.search(frame)
            path = m.group(1) if m else ""
            if path.startswith(STDLIB) or path.endswith(STDLIB):
                continue
            if path.startswith("sglang_duet/"):
                own += count
                where[frame.split(" (")[0]] += count
            break
    return {"samples": total, "duet_samples": own,
            "duet_share": own / total if total else None,
            "top_duet_frames": dict(where.most_common(10))}


def scheduler_pid(server_pid: int) -> int:
    out = subprocess.run(["pgrep", "-P", str(server_pid)], capture_output=True, text=True)
    for pid in out.stdout.split():
        cmd = open(f"/proc/{pid}/cmdline").read()
        if "scheduler" in cmd or "spawn" in cmd:
            comm = open(f"/proc/{pid}/comm").read()
            if "sched" in comm:
                return int(pid)
    raise RuntimeError("no scheduler child found")


def _wait_busy(srv: Server, timeout_s: float = 600.0) -> None:
    """Until the load's requests run: bench_serving's own start-up takes seconds on a quiet
    machine and minutes on a loaded one, and sampling an idle scheduler measures nothing."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        loads = http_json(srv.url + "/v1/loads")["loads"]
        if sum(x.get("num_running_reqs", 0) for x in loads) > 0:
            return
        time.sleep(1.0)
    raise RuntimeError(f"no request running after {timeout_s:.0f} s of bench_serving")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmark.overhead.profile", description=__doc__)
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--rate", type=int, default=100)
    p.add_argument("--out", default=os.path.join(ROOT, "benchmark/results/overhead/profile.json"))
    args = p.parse_args(argv)
    from sglang_duet.tiny_model import default_model_path

    model = str(default_model_path())
    flags = ["--duet-mode", "aggregated", "--chunked-prefill-size", "256"]
    with Server(flags) as srv, tempfile.TemporaryDirectory() as tmp:
        load = subprocess.Popen(
            [sys.executable, "-m", "sglang.bench_serving", "--backend", "sglang", "--host",
             "127.0.0.1", "--port", str(srv.port), "--dataset-name", "random-ids",
             "--random-input-len", "256", "--random-output-len", "64", "--num-prompts", "3000",
             "--max-concurrency", "32", "--seed", "3", "--tokenizer", model, "--model", model,
             "--output-file", os.path.join(tmp, "bench.jsonl")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env())
        try:
            _wait_busy(srv)
            time.sleep(5)  # past the first batches
            raw = os.path.join(tmp, "raw.txt")
            subprocess.run(
                [os.path.join(os.path.dirname(sys.executable), "py-spy"), "record", "--pid",
                 str(scheduler_pid(srv.proc.pid)), "--duration", str(args.seconds), "--rate",
                 str(args.rate), "--idle", "--format", "raw", "--output", raw],
                check=True, capture_output=True, timeout=args.seconds + 60)
            with open(raw) as f:
                result = classify(f.readlines())
        finally:
            load.kill()
    report = {"config": {"server_flags": flags, "load": "bench_serving random-ids 256/64, 32 "
                         "concurrent", "seconds": args.seconds, "rate_hz": args.rate},
              "result": result}
    write_result(args.out, report)  # the machine (cores included) is in its "stamp"
    share = result["duet_share"]
    print(f"duet's own code: {share * 100:.2f}% of {result['samples']} scheduler samples; "
          f"wrote {args.out}")


if __name__ == "__main__":
    main()
