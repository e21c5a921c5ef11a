"""Reliability fault suite: mixed load with bad requests and disconnects, a SIGTERM drain, and a
child killed under load, each on its own sglang-duet server (the embedded tiny model by default).

    python -m benchmark.serving.soak [--requests 1000] [--concurrency 64] [--kill a,b,c]

Mixed phase: each request is `good` (streamed /generate, random input ids and max_new_tokens,
ignore_eos), `abort` (the client drops the connection before or during the stream), a bad
request of every kind in `bad_requests.BAD_KINDS` (each at least once), or a chat request with
the OpenAI fields strict checks used to reject (must be served). Outcomes: completed / aborted /
errored / hung (no answer within --timeout-s); bad ones are judged clear 4xx / unclear 4xx / 5xx /
accepted. Checks: no good request lost, none hung, every bad request a clear 4xx (never 5xx), the
KV pool back to its starting free size, no leak message in the log, healthy at the end. Then the
same server gets SIGTERM (drain, `faults.drain`), and one server per --kill child loses that
child under load (`faults.kill_child`). Writes benchmark/results/serving/soak.json (stamped);
exit status 1 if any check fails.
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
from concurrent.futures import ThreadPoolExecutor

import aiohttp
import requests

from benchmark.serving import bad_requests
from benchmark.serving.bad_requests import BAD_KINDS, GOOD_OPENAI
from sglang_duet.local_server import ROOT

RESULTS_DIR = os.path.join(ROOT, "benchmark", "results", "serving")
LEAK = re.compile(r"leak", re.IGNORECASE)
BODY_LIMIT_MB = 16.0  # the server's --duet-max-body-mb default


def plan(n: int, abort_frac: float, bad_frac: float, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        u = rng.random()
        kind = ("abort" if u < abort_frac else
                rng.choice((*BAD_KINDS, GOOD_OPENAI)) if u < abort_frac + bad_frac else "good")
        out.append({"i": i, "kind": kind, "input_len": rng.randint(8, 512),
                    "max_new_tokens": rng.randint(4, 64), "abort_after": rng.randint(0, 8),
                    "abort_delay_s": rng.uniform(0.0, 0.3), "seed": rng.randrange(1 << 30)})
    if bad_frac > 0:  # every case at least once, whatever the draw
        for kind in (*BAD_KINDS, GOOD_OPENAI):
            out.append({**out[-1], "i": len(out), "kind": kind, "seed": rng.randrange(1 << 30)})
    return out


def body(req: dict, vocab: int, context: int) -> tuple[str, bytes]:
    """(path, raw body) of one planned request."""
    rng = random.Random(req["seed"])
    if req["kind"] not in ("good", "abort"):
        return bad_requests.make(req["kind"], rng, vocab, context, BODY_LIMIT_MB)
    params = {"max_new_tokens": req["max_new_tokens"], "ignore_eos": True,
              "temperature": rng.choice([0.0, 0.8])}
    payload: dict = {"input_ids": [rng.randrange(3, vocab) for _ in range(req["input_len"])],
                     "sampling_params": params, "stream": True}
    return "/generate", json.dumps(payload).encode()


async def plain(session: aiohttp.ClientSession, url: str, req: dict, path: str,
                data: bytes) -> dict:
    """A bad (or OpenAI-field) request: judged by its status and body."""
    async with session.post(url + path, data=data,
                            headers={"Content-Type": "application/json"}) as resp:
        raw = await resp.read()
        verdict = bad_requests.judge(req["kind"], resp.status, raw)
    outcome = "completed" if verdict == "ok" else "errored"
    return {"outcome": outcome, "detail": f"http {resp.status}", "verdict": verdict}


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


async def one(session, sem, url, req, path_data, timeout_s) -> dict:
    path, data = path_data
    async with sem:
        try:
            if req["kind"] not in ("good", "abort"):
                return await asyncio.wait_for(plain(session, url, req, path, data), timeout_s)
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
    verdicts: dict[str, Counter] = {}
    for r, o in zip(reqs, outs, strict=True):
        if "verdict" in o:
            verdicts.setdefault(r["kind"], Counter())[o["verdict"]] += 1
    bad = sum((verdicts.get(k, Counter()) for k in BAD_KINDS), Counter())
    healthy = requests.get(url + "/health", timeout=30).status_code == 200
    log = log_text()
    leak_lines = [ln for ln in log.splitlines() if LEAK.search(ln)]
    checks = {
        "no_lost_good_requests": good["completed"] == sum(good.values()),
        "no_hung": total["hung"] == 0,
        "every_bad_request_answered": all(by_kind.get(k, Counter())["hung"] == 0
                                          for k in BAD_KINDS),
        "every_bad_request_a_clear_4xx": bad["clear_4xx"] == bad_sent,
        "no_5xx_on_bad_input": bad["5xx"] == 0,
        "openai_fields_accepted": verdicts.get(GOOD_OPENAI, Counter())["rejected"] == 0,
        "pool_back_to_start": after["free_tokens"] == before["free_tokens"]
                              and after["used_tokens"] == 0,
        "no_leak_in_log": not leak_lines,
        "healthy_at_end": healthy,
    }
    errors = Counter(o["detail"] for r, o in zip(reqs, outs, strict=True)
                     if o["outcome"] == "errored" and r["kind"] == "good")
    return {
        "sent": len(reqs), "completed": total["completed"], "aborted": total["aborted"],
        "errored": total["errored"], "hung": total["hung"],
        "lost": sum(good.values()) - good["completed"],
        "bad_requests_sent": bad_sent, "bad_clear_4xx": bad["clear_4xx"],
        "bad_unclear_4xx": bad["unclear_4xx"], "bad_5xx": bad["5xx"],
        "bad_accepted": bad["accepted"],
        "verdicts": {k: dict(v) for k, v in sorted(verdicts.items())},
        "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())},
        "good_request_errors": dict(errors),
        "kv_pool_before": before, "kv_pool_after": after,
        "leak_log_lines": leak_lines[:20],
        "server_tracebacks_in_log": log.count("Traceback"),
        "wall_s": wall, "checks": checks, "passed": all(checks.values()),
        "config": {"requests": n, "concurrency": concurrency, "abort_frac": abort_frac,
                   "bad_frac": bad_frac, "seed": seed, "timeout_s": timeout_s},
    }


KILLS = ("sglang::scheduler", "sglang::detokenizer", "sglang::scheduler_TP1")


def start(model: str, extra: list[str], tag: str):
    from sglang_duet.local_server import Server

    args = ["--model-path", model, "--chunked-prefill-size", "64", *extra]
    return Server(args, log_path=f"/tmp/duet_soak_{tag}_{os.getpid()}.log").start(timeout=600)


def suite(model: str, n: int, concurrency: int, abort_frac: float, bad_frac: float, seed: int,
          timeout_s: float, drain_deadline_s: float, kills: tuple[str, ...] = KILLS,
          tp_kill: int = 2) -> dict:
    """The whole fault suite, each part on its own server; returns the report."""
    from benchmark.serving import faults

    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    vocab, context = int(cfg["vocab_size"]), int(cfg["max_position_embeddings"])
    srv = start(model, ["--duet-drain-timeout-s", str(drain_deadline_s)], "mixed")
    try:
        big = faults.health_during_big_body(srv.url)
        mixed = soak(srv.url, n, concurrency, abort_frac, bad_frac, seed, timeout_s, vocab,
                     context, log_text=lambda: srv.log(tail=0))
        drained = faults.drain(srv, drain_deadline_s)
    finally:
        srv.stop()
    killed = {}
    with ThreadPoolExecutor(max(len(kills), 1)) as pool:  # started together: mostly imports
        starts = {title: pool.submit(start, model,
                                     ["--tp-size", str(tp_kill)] if "_TP" in title else [],
                                     title.split("::")[-1]) for title in kills}
    try:
        for title, fut in starts.items():  # one kill at a time; the others wait idle
            killed[title] = faults.kill_child(fut.result(), title)
            fut.result().stop()
    finally:  # every server that started, whatever failed (stop is idempotent)
        for fut in starts.values():
            if fut.exception() is None:
                fut.result().stop()
    return {
        "tried": mixed["sent"], "clear_4xx": mixed["bad_clear_4xx"],
        "bad_input_5xx": mixed["bad_5xx"], "lost": mixed["lost"], "hung": mixed["hung"],
        "kv_pool_at_end": mixed["kv_pool_after"], "health_during_10mb_body": big,
        "time_to_503_s": {t: r.get("time_to_503_s") for t, r in killed.items()},
        "time_to_exit_s": {"drain": drained["time_to_exit_s"],
                           **{t: r.get("time_to_exit_s") for t, r in killed.items()}},
        "passed": mixed["passed"] and drained["passed"] and big["big_request_status"] == 400
        and all(
            r["passed"] for r in killed.values()),
        "mixed": mixed, "drain": drained, "kill": killed,
        "server": "python -m sglang_duet.launch_server --chunked-prefill-size 64 (tiny model)",
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
    p.add_argument("--drain-deadline-s", type=float, default=3.0,
                   help="the server's --duet-drain-timeout-s in the drain scenario")
    p.add_argument("--kill", default=",".join(KILLS),
                   help="child processes to kill, one server each ('' for none)")
    p.add_argument("--model", default=None, help="default: the embedded tiny model")
    p.add_argument("--out", default=os.path.join(RESULTS_DIR, "soak.json"))
    a = p.parse_args(argv)
    model = a.model
    if model is None:
        from sglang_duet.tiny_model import default_model_path

        model = str(default_model_path())
    report = suite(model, a.requests, a.concurrency, a.abort_frac, a.bad_frac, a.seed,
                   a.timeout_s, a.drain_deadline_s, tuple(k for k in a.kill.split(",") if k))
    from benchmark.stamp import write_result

    write_result(a.out, report)
    print(json.dumps({k: report[k] for k in ("tried", "clear_4xx", "bad_input_5xx", "lost",
                                             "hung", "time_to_503_s", "time_to_exit_s",
                                             "kv_pool_at_end", "passed")}))
    print(f"[soak] wrote {a.out}")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
