"""Fault scenarios on a live server: a SIGTERM drain with its deadline, and a child process
(scheduler, a TP rank, the detokenizer) killed under load.

Each scenario ends the server it is given. What is measured (seconds from the fault): the first
503 (from /health, or to a new request during a drain), the server's exit and its status; how
every open stream ended: `completed`, `error_event` (an SSE `{"error": ...}` event, then the
end), `cut` (connection dropped with no error event), `hung` (no end within the timeout); and
whether any process of the server outlived it.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import time
from collections import Counter

import aiohttp
import psutil

CRASH_WORDS = re.compile(r"crash|SIGQUIT|Traceback", re.IGNORECASE)


def children(server) -> dict[str, int]:
    """Process title -> pid of the server's children (sglang::scheduler, ...), also those forked
    from its fork server (sglang_duet/server/forkserver.py)."""
    out = {}
    for c in psutil.Process(server.proc.pid).children(recursive=True):
        try:
            title = c.cmdline()[0] if c.cmdline() else c.name()
        except psutil.Error:
            continue
        out[title.split()[0]] = c.pid
    return out


def tree(server) -> list[int]:
    p = psutil.Process(server.proc.pid)
    return [p.pid, *(c.pid for c in p.children(recursive=True))]


async def stream(session, url: str, max_new_tokens: int, seed: int, timeout_s: float,
                 started: asyncio.Event | None = None) -> str:
    rng = random.Random(seed)
    body = {"input_ids": [rng.randrange(3, 2000) for _ in range(rng.randint(8, 64))],
            "sampling_params": {"max_new_tokens": max_new_tokens, "ignore_eos": True},
            "stream": True}

    async def run() -> str:
        async with session.post(url + "/generate", json=body) as resp:
            if resp.status != 200:
                return f"http_{resp.status}"
            async for line in resp.content:
                if started is not None:
                    started.set()
                if line.startswith(b"data:") and b'"error"' in line:
                    return "error_event"
            return "completed"

    try:
        return await asyncio.wait_for(run(), timeout_s)
    except asyncio.TimeoutError:
        return "hung"
    except (aiohttp.ClientError, ConnectionError):
        return "cut"


async def first_503(session, url: str, t0: float, limit_s: float) -> float | None:
    """Seconds from t0 to the first /health 503 (None: never, within limit_s)."""
    while time.monotonic() - t0 < limit_s:
        try:
            async with session.get(url + "/health", timeout=aiohttp.ClientTimeout(total=1)) as r:
                if r.status == 503:
                    return time.monotonic() - t0
        except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError):
            pass
        await asyncio.sleep(0.05)
    return None


async def new_requests_during_drain(session, url: str, t0: float, limit_s: float) -> dict:
    """Keep sending new requests until the server is gone: their statuses, the first 503, and
    how many were admitted after it (must be 0; one sent before the server handled the signal
    can still be admitted)."""
    statuses: Counter = Counter()
    first = None
    admitted_after = 0
    while time.monotonic() - t0 < limit_s:
        try:
            async with session.post(url + "/generate", json={
                    "text": "hi", "sampling_params": {"max_new_tokens": 2}}) as r:
                await r.read()
                statuses[r.status] += 1
                if r.status == 503 and first is None:
                    first = time.monotonic() - t0
                admitted_after += first is not None and r.status == 200
        except (aiohttp.ClientError, ConnectionError):
            break
        await asyncio.sleep(0.1)
    return {"statuses": {str(k): v for k, v in sorted(statuses.items())}, "first_503_s": first,
            "admitted_after_first_503": admitted_after}


async def _wait_started(events: list[asyncio.Event], limit_s: float) -> int:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and not all(e.is_set() for e in events):
        await asyncio.sleep(0.05)
    return sum(e.is_set() for e in events)


def _survivors(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.Error:
            pass
    return alive


async def _kill_child(server, title: str, streams: int, timeout_s: float) -> dict:
    kids = children(server)
    pid = next((p for t, p in kids.items() if t == title), None)
    if pid is None:
        return {"error": f"no child {title!r}; children: {sorted(kids)}"}
    pids = tree(server)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        started = [asyncio.Event() for _ in range(streams)]
        tasks = [asyncio.ensure_future(stream(s, server.url, 3000, i, timeout_s, started[i]))
                 for i in range(streams)]
        running = await _wait_started(started, 60.0)
        t0 = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        t503 = await first_503(s, server.url, t0, 15.0)
        ends = Counter(await asyncio.gather(*tasks))
    rc = await asyncio.to_thread(server.proc.wait, 60)
    return {"child": title, "streams_open_at_kill": running, "stream_ends": dict(ends),
            "time_to_503_s": t503, "time_to_exit_s": time.monotonic() - t0, "exit_status": rc,
            "survivors": _survivors(pids)}


def kill_child(server, title: str, streams: int = 6, timeout_s: float = 60.0) -> dict:
    """Kill `title` (e.g. sglang::detokenizer) with SIGKILL while `streams` streams are open."""
    report = asyncio.run(_kill_child(server, title, streams, timeout_s))
    if "error" in report:
        report["passed"] = False
        return report
    ends = report["stream_ends"]
    report["checks"] = {
        "503_within_2s": report["time_to_503_s"] is not None and report["time_to_503_s"] < 2.0,
        # streams under way get the error event; any not yet answered get a 503 instead
        "streams_end_with_error_event": ends.get("error_event", 0) >= report[
            "streams_open_at_kill"] and set(ends) <= {"error_event", "http_503"},
        "exit_nonzero_within_10s": report["exit_status"] not in (0, None)
        and report["time_to_exit_s"] < 10.0,
        "no_process_left": not report["survivors"],
    }
    report["passed"] = all(report["checks"].values())
    return report


async def _drain(server, deadline_s: float, short: int, long: int, timeout_s: float) -> dict:
    pids = tree(server)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        started = [asyncio.Event() for _ in range(short + long)]
        tasks = [asyncio.ensure_future(stream(s, server.url, 8 if i < short else 3000, 100 + i,
                                              timeout_s, started[i]))
                 for i in range(short + long)]
        running = await _wait_started(started, 60.0)
        t0 = time.monotonic()
        os.killpg(server.proc.pid, signal.SIGTERM)  # the whole group, as a supervisor does
        newer = await new_requests_during_drain(s, server.url, t0, deadline_s + 15.0)
        ends = await asyncio.gather(*tasks)
    rc = await asyncio.to_thread(server.proc.wait, 60)
    return {"deadline_s": deadline_s, "streams_open_at_sigterm": running,
            "short_stream_ends": dict(Counter(ends[:short])),
            "long_stream_ends": dict(Counter(ends[short:])), "new_requests": newer,
            "time_to_exit_s": time.monotonic() - t0, "exit_status": rc,
            "survivors": _survivors(pids)}


def drain(server, deadline_s: float, short: int = 4, long: int = 4,
          timeout_s: float = 120.0) -> dict:
    """SIGTERM to the server's process group with `short` 8-token streams (which must finish)
    and `long` 3000-token streams (which must end with an error event at the deadline) open."""
    report = asyncio.run(_drain(server, deadline_s, short, long, timeout_s))
    log = server.log(tail=0)
    tail = log[log.rfind("SIGTERM"):] if "SIGTERM" in log else ""
    report["crash_lines_after_sigterm"] = [ln for ln in tail.splitlines()
                                           if CRASH_WORDS.search(ln)][:10]
    new = report["new_requests"]
    report["checks"] = {
        "short_streams_completed": set(report["short_stream_ends"]) == {"completed"},
        "long_streams_end_with_error_event": set(report["long_stream_ends"]) == {"error_event"},
        "new_requests_503_once_draining": new["first_503_s"] is not None
        and new["admitted_after_first_503"] == 0 and set(new["statuses"]) <= {"200", "503"},
        "exit_0_after_deadline": report["exit_status"] == 0
        and report["time_to_exit_s"] < report["deadline_s"] + 10.0,
        "no_process_left": not report["survivors"],
        "not_logged_as_crash": not report["crash_lines_after_sigterm"],
    }
    report["passed"] = all(report["checks"].values())
    return report


async def _health_times(s, url: str, until) -> list[float]:
    times = []
    while not until():
        t0 = time.perf_counter()
        async with s.get(url + "/health") as r:
            await r.read()
        times.append(time.perf_counter() - t0)
        await asyncio.sleep(0.01)
    return sorted(times)


def _ms(times: list[float], q: float) -> float | None:
    return round(1e3 * times[min(len(times) - 1, int(q * len(times)))], 1) if times else None


async def _health_during_big_body(url: str, mb: float, bodies: int) -> dict:
    body = json.dumps({"model": "default", "prompt": "word " * int(mb * (1 << 20) / 5),
                       "max_tokens": 2}).encode()
    async with aiohttp.ClientSession() as s:
        n = [0]
        idle = await _health_times(s, url, lambda: (n.__setitem__(0, n[0] + 1) or n[0] > 5))

        async def big() -> list[int]:
            out = []
            for _ in range(bodies):
                async with s.post(url + "/v1/completions", data=body,
                                  headers={"Content-Type": "application/json"}) as r:
                    await r.read()
                    out.append(r.status)
            return out

        task = asyncio.ensure_future(big())
        busy = await _health_times(s, url, task.done)
        statuses = await task
    return {"body_mb": mb, "bodies": bodies, "big_request_statuses": sorted(set(statuses)),
            "big_request_status": statuses[0] if len(set(statuses)) == 1 else None,
            "health_idle_p50_ms": _ms(idle, 0.5), "health_checks_during": len(busy),
            "health_during_p50_ms": _ms(busy, 0.5), "health_during_max_ms": _ms(busy, 1.0),
            "note": "client-side times on the same machine; sglang-duet answers /health in its "
                    "middleware (stock SGLang's runs a one-token generation, >= 1 s)"}


def health_during_big_body(url: str, mb: float = 10.0, bodies: int = 3) -> dict:
    """/health latency, idle and while `bodies` `mb`-MB completion bodies are received, judged
    and rejected one after the other."""
    return asyncio.run(_health_during_big_body(url, mb, bodies))


def summary(report: dict) -> str:
    keep = {k: v for k, v in report.items() if k not in ("checks",)}
    return json.dumps(keep)[:600]
