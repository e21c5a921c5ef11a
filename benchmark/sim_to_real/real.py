"""The real side: each compared system as a server on this machine, every load point replayed
through bench_serving (`benchmark.serving.compare.run_bench`: bench_serving's own CLI, the
replay file's timestamps), one server at a time.

Systems (all on the same model, KV pool 16384 tokens, fp32, torch_native attention: the CPU
flags of `sglang_duet.local_server.STOCK_CPU_FLAGS` / `sglang_duet.cpu.CPU_SETTINGS`):

* `sglang-chunked`: `python -m sglang.launch_server --enable-mixed-chunk
  --chunked-prefill-size C`;
* `sglang-default`: `python -m sglang.launch_server` (SGLang's own chunk size and loop);
* `duet-aggregated`: `python -m sglang_duet.launch_server --duet-mode aggregated
  --chunked-prefill-size C --duet-plan-log ...`.

Every server process runs one OpenMP thread (`SERVER_ENV`): on this shared 2-core machine a
two-thread GEMM stalls whenever another job holds a core (probe, cpu-bench model, 12 decodes:
190-1400 ms with two threads, 85-180 ms with one), and one thread leaves the other core to the
tokenizer, detokenizer and client.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass

import numpy as np

from benchmark.serving.compare import Config, run_bench
from benchmark.sim_to_real.cpu_meter import CpuMeter, set_autogroup_nice, wait_for_quiet
from benchmark.sim_to_real.sglang_log import window_stats
from benchmark.sim_to_real.simulate import summarize
from sglang_duet.local_server import Server

SERVER_ENV = {"OMP_NUM_THREADS": "1"}
# every server logs each batch (`sglang_log`): the schedule it ran, per load point
COMMON_FLAGS = ("--decode-log-interval", "1")


@dataclass(frozen=True)
class RealSystem:
    name: str
    stock: bool
    flags: tuple[str, ...]
    chunked: bool  # takes the benchmark's chunk size
    mixed: bool = True  # extend batches carry the running decodes


REAL_SYSTEMS = {
    s.name: s for s in (
        RealSystem("sglang-chunked", True, ("--enable-mixed-chunk",), True),
        RealSystem("sglang-default", True, (), False, mixed=False),
        RealSystem("duet-aggregated", False, ("--duet-mode", "aggregated"), True),
    )
}
_LOGGED = ("chunked_prefill_size", "max_prefill_tokens", "max_running_requests",
           "max_total_num_tokens", "enable_mixed_chunk", "disable_overlap_schedule",
           "page_size", "schedule_policy")


def server_settings(log_text: str) -> dict:
    """The effective scheduler settings SGLang logs at start-up (last value of each)."""
    out = {}
    for key in _LOGGED:
        found = re.findall(rf"\b{key}=([\w.\-']+)", log_text)
        if found:
            v = found[-1].strip("'")
            out[key] = int(v) if re.fullmatch(r"-?\d+", v) else v
    return out


def real_metrics(result: dict) -> dict:
    """bench_serving's per-request lists reduced like the simulator's (`simulate.summarize`)."""
    errors = result.get("errors") or []
    ok = [i for i, t in enumerate(result.get("ttfts") or [])
          if t and not (i < len(errors) and errors[i])]
    ttft = np.array([result["ttfts"][i] for i in ok])
    gaps = np.array([g for i in ok for g in (result["itls"][i] or [])])
    out = summarize(ttft, gaps, int(result.get("completed") or 0),
                    float(result.get("duration") or 0.0),
                    int(result.get("total_output_tokens") or 0))
    out["failed"] = sum(1 for e in errors if e)
    out["ttft_ms"] = [round(float(t) * 1e3, 1) for t in ttft]
    return out


def _bench_cfg(model: str, n: int, seed: int, timeout_s: float) -> Config:
    return Config(trace="sim_to_real", qps=[], systems=[], model=model, num_requests=n,
                  arrival="trace", seed=seed, run_timeout_s=timeout_s)


def run_system(system: RealSystem, model: str, chunk: int, points: list[tuple[float, int, str]],
               work: str, progress=print, seed: int = 0, timeout_s: float = 600.0,
               extra: tuple[str, ...] = (), quiet: tuple[float, float] = (0.5, 0.0),
               nice: int = 0, passes: int = 1) -> dict:
    """Start the server, warm it up (the first 8 requests of the last point, unmeasured), replay
    every (qps, requests, file) point, stop it. Plan logs of duet land in `work`. `quiet`:
    (cores, seconds) -- before each point wait up to that long for other jobs to use at most
    that many cores (`cpu_meter.wait_for_quiet`; 0 s: no wait). `nice`: the server session's
    autogroup niceness while it runs (`cpu_meter.set_autogroup_nice`; 0: unchanged). With
    `passes` 2 the points are replayed a second time on the same server (`repeat_runs`): how
    far two measurements of one system agree, the floor under any simulator's error."""
    args = ["--model-path", model, *system.flags, *COMMON_FLAGS, *extra]
    if system.chunked:
        args += ["--chunked-prefill-size", str(chunk)]
    plan_log = os.path.join(work, f"plan_{system.name}")
    if not system.stock:
        args += ["--duet-plan-log", plan_log]
    srv = Server(args, stock=system.stock, log_path=os.path.join(work, f"server_{system.name}.log"))
    entry: dict = {"status": "ran", "runs": []}
    saved = {k: os.environ.get(k) for k in SERVER_ENV}
    os.environ.update(SERVER_ENV)
    try:
        t0 = time.time()
        if nice:  # as soon as the server's session exists (its start-up is long on a busy CPU)
            threading.Thread(target=_renice_when_started, args=(srv, nice, entry),
                             daemon=True).start()
        srv.start(timeout=420)
        entry["start_s"] = round(time.time() - t0, 1)
        entry["command"] = " ".join(srv.command()[1:])
        entry["settings"] = server_settings(srv.log(tail=0))
        progress(f"[sim_to_real] {system.name}: healthy after {entry['start_s']} s "
                 f"({entry['settings']})")
        q, _, path = points[-1]
        with open(os.path.join(work, f"warmup_{system.name}.log"), "w") as log:
            run_bench(_bench_cfg(model, min(8, points[-1][1]), seed, timeout_s), srv.port, path,
                      q, os.path.join(work, f"warmup_{system.name}.jsonl"), log)
        for k, (q, n, path) in enumerate(points * passes):
            second = k >= len(points)
            out = os.path.join(work, f"bench_{system.name}_qps{q:g}{'_2' if second else ''}.jsonl")
            run: dict = {"qps": q, "requests": n}
            if quiet[1] > 0:
                run["quiet_wait"] = wait_for_quiet(srv.proc.pid, quiet[0], quiet[1])
            with open(out[:-len(".jsonl")] + ".log", "w") as log, \
                    CpuMeter(srv.proc.pid) as meter:
                try:
                    res = run_bench(_bench_cfg(model, n, seed, timeout_s), srv.port, path, q,
                                    out, log)
                    run["metrics"] = real_metrics(res)
                    # the timed part: bench_serving writes its result as it ends (its start-up
                    # and warm-up request come before, its exit after)
                    end = os.path.getmtime(out)
                    run["window"] = [round(end - float(res.get("duration") or 0.0), 3),
                                     round(end, 3)]
                except (subprocess.SubprocessError, OSError, ValueError, IndexError) as e:
                    run["error"] = f"{type(e).__name__}: {e}"
            run["cpu"] = meter.result()
            entry.setdefault("repeat_runs" if second else "runs", []).append(run)
            m = run.get("metrics")
            progress(f"[sim_to_real] {system.name} qps={q:g}: " + (
                f"{m['completed']}/{n}, {m['throughput_rps']} req/s, TTFT p50 "
                f"{m['ttft_p50_ms']} ms, TBT p50 {m['tbt_p50_ms']} ms; others "
                f"{run['cpu'].get('others_cores')} cores" if m else f"FAILED {run['error']}"))
    except (RuntimeError, TimeoutError, subprocess.SubprocessError) as e:
        entry.update(status="failed", reason=str(e)[-1500:])
        progress(f"[sim_to_real] {system.name}: failed ({str(e)[-300:]})")
    finally:
        srv.stop()
        text = srv.log(tail=0)
        for run in entry["runs"] + entry.get("repeat_runs", []):  # what SGLang logged per point
            if run.get("window"):
                run["schedule"] = window_stats(text, tuple(run["window"]), system.mixed)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    entry["plan_logs"] = sorted(glob.glob(plan_log + ".tp*"))
    return entry


def _renice_when_started(srv: Server, nice: int, entry: dict, timeout_s: float = 60.0) -> None:
    deadline = time.time() + timeout_s
    while srv.proc is None and time.time() < deadline:
        time.sleep(0.05)
    ok = srv.proc is not None and set_autogroup_nice(srv.proc.pid, nice) is not None
    entry["autogroup_nice"] = nice if ok else "not set"

