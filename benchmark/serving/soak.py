"""Reliability soak: many streamed requests, random client aborts and bad requests, then checks.

    python -m benchmark.serving.soak [--requests 1000] [--concurrency 64] [--url URL | --system S]

Each request is one of: `good` (streamed /generate, random input ids and max_new_tokens,
ignore_eos), `abort` (like good, but the client drops the connection before or during the
stream), or a bad request: `malformed_json`, `negative_max_tokens`, `too_long_prompt` (over the
context length), `unknown_field` (extra fields at the top level and in sampling_params).
Outcomes: completed / aborted / errored / hung (no answer within --timeout-s). Checks (exit status
1 if any fails): no good request lost (each completes with exactly its max_new_tokens), none hung,
every bad request answered, the KV pool back to its starting free size (radix cache flushed,
`/v1/loads` num_used_tokens), no leak message in the server log, server healthy at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import time
from collections import Counter

import aiohttp
import requests

from benchmark.serving.launch import ROOT
from benchmark.serving.systems import SYSTEMS, make_server

RESULTS_DIR = os.path.join(ROOT, "benchmark", "results", "serving")
BAD_KINDS = ("malformed_json", "negative_max_tokens", "too_long_prompt", "unknown_field")
LEAK = re.compile(r"leak", re.IGNORECASE)


def plan(n: int, abort_frac: float, bad_frac: float, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        u = rng.random()
        kind = ("abort" if u < abort_frac else
                rng.choice(BAD_KINDS) if u < abort_frac + bad_frac else "good")
        out.append({"i": i, "kind": kind, "input_len": rng.randint(8, 512),
                    "max_new_tokens": rng.randint(4, 64), "abort_after": rng.randint(0, 8),
                    "abort_delay_s": rng.uniform(0.0, 0.3), "seed": rng.randrange(1 << 30)})
    return out


def body(req: dict, vocab: int, context: int) -> bytes:
    rng = random.Random(req["seed"])
    n = context + 100 if req["kind"] == "too_long_prompt" else req["input_len"]
    params = {"max_new_tokens": req["max_new_tokens"], "ignore_eos": True,
              "temperature": rng.choice([0.0, 0.8])}
    payload: dict = {"input_ids": [rng.randrange(3, vocab) for _ in range(n)],
                     "sampling_params": params, "stream": True}
    if req["kind"] == "negative_max_tokens":
        params["max_new_tokens"] = -5
    elif req["kind"] == "unknown_field":
        payload["no_such_field"] = 1
        params["no_such_param"] = 2
    text = json.dumps(payload)
    return text[: len(text) // 2].encode() if req["kind"] == "malformed_json" else text.encode()


async def stream(session: aiohttp.ClientSession, url: str, req: dict, data: bytes) -> dict:
    """Send one request; returns {outcome, detail}. Aborts close the connection mid-way."""
    chunks, last = 0, None
    async with session.post(url + "/generate", data=data,
                            headers={"Content-Type": "application/json"}) as resp:
        if resp.status != 200:
            return {"outcome": "errored", "detail": f"http {resp.status}"}
        async for line in resp.content:
            line = line.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            msg = json.loads(line[5:])
            if "error" in msg:
                return {"outcome": "errored", "detail": "error in stream"}
            chunks, last = chunks + 1, msg
            if req["kind"] == "abort" and chunks > req["abort_after"]:
                resp.close()
                return {"outcome": "aborted", "detail": f"after {chunks} chunks"}
    if last is None:
        return {"outcome": "errored", "detail": "empty stream"}
    meta = last.get("meta_info", {})
    if meta.get("completion_tokens") != req["max_new_tokens"]:
        return {"outcome": "errored",
                "detail": f"short: {meta.get('completion_tokens')} tokens, "
                          f"finish {meta.get('finish_reason')}"}
    return {"outcome": "completed", "detail": ""}


async def one(session, sem, url, req, data, timeout_s) -> dict:
    async with sem:
        try:
            if req["kind"] == "abort" and req["abort_after"] == 0:
                try:  # drop the connection before the first token arrives
                    return await asyncio.wait_for(stream(session, url, req, data),
                                                  req["abort_delay_s"])
                except asyncio.TimeoutError:
                    return {"outcome": "aborted", "detail": "before first chunk"}
            return await asyncio.wait_for(stream(session, url, req, data), timeout_s)
        except asyncio.TimeoutError:
            return {"outcome": "hung", "detail": f"no answer in {timeout_s} s"}
        except (aiohttp.ClientError, ValueError) as e:
            return {"outcome": "errored", "detail": f"{type(e).__name__}: {e}"[:200]}


async def drive(url: str, reqs: list[dict], concurrency: int, timeout_s: float, vocab: int,
                context: int) -> list[dict]:
    sem = asyncio.Semaphore(concurrency)
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as session:
        tasks = [one(session, sem, url, r, body(r, vocab, context), timeout_s) for r in reqs]
        return await asyncio.gather(*tasks)


def pool_state(url: str, settle_s: float = 60.0) -> dict:
    """Flush the radix cache and read the KV pool once the server is idle (bounded wait)."""
    deadline = time.time() + settle_s
    while True:
        requests.post(url + "/flush_cache", timeout=30)
        loads = requests.get(url + "/v1/loads", timeout=30).json()["loads"]
        used = sum(x["num_used_tokens"] for x in loads)
        busy = sum(x.get("num_running_reqs", 0) + x.get("num_waiting_reqs", 0) for x in loads)
        if (used == 0 and busy == 0) or time.time() > deadline:
            break
        time.sleep(1.0)
    info = requests.get(url + "/server_info", timeout=30).json()
    total = info.get("max_total_num_tokens") or (info.get("internal_states") or [{}])[0].get(
        "max_total_num_tokens")
    return {"used_tokens": used, "busy_requests": busy, "total_tokens": total,
            "free_tokens": (total - used) if total is not None else None}


def soak(url: str, n: int, concurrency: int, abort_frac: float, bad_frac: float, seed: int,
         timeout_s: float, vocab: int, context: int, log_text=lambda: "") -> dict:
    before = pool_state(url)
    reqs = plan(n, abort_frac, bad_frac, seed)
    t0 = time.time()
    outs = asyncio.run(drive(url, reqs, concurrency, timeout_s, vocab, context))
    wall = time.time() - t0
    after = pool_state(url)
    by_kind: dict[str, Counter] = {}
    for r, o in zip(reqs, outs, strict=True):
        by_kind.setdefault(r["kind"], Counter())[o["outcome"]] += 1
    total = Counter(o["outcome"] for o in outs)
    good = by_kind.get("good", Counter())
    bad_sent = sum(sum(by_kind.get(k, Counter()).values()) for k in BAD_KINDS)
    healthy = requests.get(url + "/health", timeout=30).status_code == 200
    log = log_text()
    leak_lines = [ln for ln in log.splitlines() if LEAK.search(ln)]
    checks = {
        "no_lost_good_requests": good["completed"] == sum(good.values()),
        "no_hung": total["hung"] == 0,
        "every_bad_request_answered": all(by_kind.get(k, Counter())["hung"] == 0
                                          for k in BAD_KINDS),
        "pool_back_to_start": after["free_tokens"] == before["free_tokens"]
                              and after["used_tokens"] == 0,
        "no_leak_in_log": not leak_lines,
        "healthy_at_end": healthy,
    }
    errors = Counter(o["detail"] for r, o in zip(reqs, outs, strict=True)
                     if o["outcome"] == "errored" and r["kind"] == "good")
    return {
        "sent": n, "completed": total["completed"], "aborted": total["aborted"],
        "errored": total["errored"], "hung": total["hung"],
        "lost": sum(good.values()) - good["completed"],
        "bad_requests_sent": bad_sent,
        "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())},
        "good_request_errors": dict(errors),
        "kv_pool_before": before, "kv_pool_after": after,
        "leak_log_lines": leak_lines[:20],
        "server_tracebacks_in_log": log.count("Traceback"),
        "wall_s": wall, "checks": checks, "passed": all(checks.values()),
        "config": {"requests": n, "concurrency": concurrency, "abort_frac": abort_frac,
                   "bad_frac": bad_frac, "seed": seed, "timeout_s": timeout_s},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmark.serving.soak", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--abort-frac", type=float, default=0.10)
    p.add_argument("--bad-frac", type=float, default=0.08)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout-s", type=float, default=180.0, help="per request")
    p.add_argument("--url", default=None, help="use a running server instead of starting one")
    p.add_argument("--system", default="duet", choices=sorted(SYSTEMS))
    p.add_argument("--model", default=None, help="default: the embedded tiny model")
    p.add_argument("--server-args", default="")
    p.add_argument("--out", default=os.path.join(RESULTS_DIR, "soak.json"))
    a = p.parse_args(argv)
    model = a.model
    if model is None:
        from sglang_duet.tiny_model import default_model_path

        model = str(default_model_path())
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    vocab, context = int(cfg["vocab_size"]), int(cfg["max_position_embeddings"])
    srv = None
    try:
        if a.url is None:
            srv = make_server(SYSTEMS[a.system], model, extra=a.server_args.split(),
                              log_path=f"/tmp/duet_soak_{os.getpid()}.log").start()
        url = a.url or srv.url
        report = soak(url, a.requests, a.concurrency, a.abort_frac, a.bad_frac, a.seed,
                      a.timeout_s, vocab, context,
                      log_text=(lambda: srv.log(tail=0)) if srv else (lambda: ""))
        report["server"] = " ".join(srv.command()[1:]) if srv else url
    finally:
        if srv:
            srv.stop()
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps({k: report[k] for k in ("sent", "completed", "aborted", "errored", "hung",
                                             "lost", "passed")}))
    print(f"[soak] pool before {report['kv_pool_before']} after {report['kv_pool_after']}; "
          f"checks {report['checks']}; wrote {a.out}")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
