"""Admission order on real servers on this CPU (issue #48 item 6), next to the simulator.

    python -m benchmark.sim_to_real.admission              # ~10 min on a quiet 2-core machine
    python -m benchmark.sim_to_real.admission --sim-only   # the predictions alone, no server

One heavy-tailed slice of the Mooncake conversation trace, scaled to this machine, replayed at one
overload point with the same Poisson arrivals through three real servers on the `cpu-bench`
model (`real.run_system`: one OpenMP thread, autogroup niceness, bench_serving with the file's
timestamps), and through the simulator with the committed CPU profile of
`benchmark/results/sim_to_real/` (`simulate.simulate_point`):

* `sglang-fcfs`: stock `sglang.launch_server --enable-mixed-chunk --chunked-prefill-size C
  --schedule-policy fcfs` (SGLang 0.5.17's default order); sim: `sglang-chunked`, fcfs;
* `sglang-lpm`: the same with `--schedule-policy lpm`; sim: `sglang-chunked`, lpm (when the
  simulator has it, `sim.schedule.SGLANG_ORDERS`);
* `duet-deadline`: `sglang_duet.launch_server --duet-mode aggregated --duet-admission deadline
  --duet-ttft-slo-ms S`; sim: `duet` aggregated, `duet_admission` deadline, the same SLO.

The slice (`trace_slice`): `requests` consecutive trace requests from a start drawn by the seed
(a contiguous slice keeps the trace's own mix of conversation turns and its tail: prompts from
~900 to ~120K tokens, median ~7K). Lengths x `scale` (1/64: median ~110, longest ~1900 prompt
tokens; outputs 2-31 tokens), the Mooncake blocks kept as shared prefixes
(`benchmark.serving.convert`). Arrivals: the simulator's Poisson rule at `qps`.

The TTFT SLO (`scaled_slo_ms`): the trace's 10 s on a GPU is a multiple of one mean prompt's
prefill there (Qwen3-8B, H100, the published calibration); the CPU SLO is the same multiple of
the scaled mean prompt's prefill on the CPU profile. Lengths and SLO thus shrink together, and
what decides whether a first token is late is how long it queues behind others.

Metrics (`attainment`): share of sent requests whose first token came within the SLO (a failed
request misses), P99 and max TTFT of those that completed, the same share for the longest tenth
of prompts (a policy may not win by parking them). Targets: duet's attainment above both stock
policies; each simulated attainment within 0.1 of the measured one.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from benchmark.serving.convert import ReplayRequest, convert, model_max_len
from benchmark.serving.traces import TraceRequest, load_trace
from benchmark.sim_to_real.admission_profile import (
    contended_profile,
    measured_slowdown,
    profile_paths,
    refit,
)
from benchmark.sim_to_real.admission_report import markdown, verdict
from benchmark.sim_to_real.real import RealSystem, run_system
from benchmark.stamp import ROOT, write_result

TRACE = "mooncake"
# one profile for every system: the same model's iterations on this machine, as stock SGLang's
# log timed them (duet's own profile, fitted to its plan log, adds its synchronous loop)
SHARED_PROFILE = "cpu_calibration_sglang-chunked.json"
GPU_SLO_MS = 10000.0  # the trace's TTFT SLO on the GPU (the capacity rule)
SIM_TO_REAL = os.path.join(str(ROOT), "benchmark", "results", "sim_to_real")
RESULTS_DIR = os.path.join(SIM_TO_REAL, "admission")


@dataclass
class Config:
    requests: int = 150
    qps: float = 3.0  # the overload point (req/s)
    scale: float = 1 / 64
    ttft_slo_ms: float = 0.0  # 0: `scaled_slo_ms`
    chunk: int = 128
    kv_tokens: int = 16384  # --max-total-tokens: holds the longest prompts, never binds
    seed: int = 0
    systems: list[str] = field(default_factory=lambda: ["sglang-fcfs", "sglang-lpm",
                                                         "duet-deadline"])
    model: str = ""  # "" -> the embedded cpu-bench model
    profile_dir: str = SIM_TO_REAL  # the committed CPU profile (cpu_*.json)
    tag: str = "cpu"
    out_dir: str = RESULTS_DIR
    sim_only: bool = False
    keep: str = ""  # a results JSON of the same workload: its measured systems are not rerun
    nice: int = -10
    quiet_cores: float = 0.5
    quiet_wait_s: float = 30.0
    passes: int = 2  # replays per server (the second on the same server, cache flushed)


@dataclass(frozen=True)
class Compared:
    """One compared system: the real server and the simulator's view of it."""

    name: str
    real: RealSystem
    sim_system: str  # simulate.SIM_SYSTEMS key
    calibration: str  # file in the profile dir: the system's own fitted CPU profile
    sim: dict  # SimConfig overrides besides the SLO


def compared(slo_ms: float) -> dict[str, Compared]:
    stock = ("--enable-mixed-chunk", "--schedule-policy")
    rows = [
        Compared("sglang-fcfs", RealSystem("sglang-fcfs", True, (*stock, "fcfs"), True),
                 "sglang-chunked", "cpu_calibration_sglang-chunked.json",
                 {"schedule_policy": "fcfs"}),
        Compared("sglang-lpm", RealSystem("sglang-lpm", True, (*stock, "lpm"), True),
                 "sglang-chunked", "cpu_calibration_sglang-chunked.json",
                 {"schedule_policy": "lpm"}),
        Compared("duet-deadline", RealSystem(
            "duet-deadline", False, ("--duet-mode", "aggregated", "--duet-admission", "deadline",
                                     "--duet-ttft-slo-ms", f"{slo_ms:g}"), True),
                 "duet-aggregated", "cpu_calibration.json", {"duet_admission": "deadline"}),
    ]
    return {c.name: c for c in rows}


def trace_slice(trace: Sequence[TraceRequest], n: int, seed: int) -> tuple[int, list]:
    """`n` consecutive requests from a start drawn by `seed`: (start, requests)."""
    if not 0 < n <= len(trace):
        raise ValueError(f"{n} requests from a trace of {len(trace)}")
    start = int(np.random.default_rng([seed, 48]).integers(0, len(trace) - n + 1))
    return start, list(trace[start:start + n])


def build_requests(cfg: Config, tokenizer, max_len: int | None
                   ) -> tuple[list[ReplayRequest], dict]:
    """The replayed requests (prompts of exact scaled lengths, Poisson timestamps) and info,
    with each prompt's whole shared blocks (``hash_ids``: the simulator's prefix cache)."""
    start, reqs = trace_slice(load_trace(TRACE), cfg.requests, cfg.seed)
    rows, info = convert(reqs, tokenizer, cfg.scale, max_len, "poisson-replay", cfg.qps,
                         cfg.seed)
    lens = np.array([r.prompt_len for r in rows])
    block = info["mooncake_block_tokens"]
    info.update(trace=TRACE, start=start, prompt_pct={
        f"p{q}": round(float(np.percentile(lens, q)), 1) for q in (50, 90, 99, 100)},
        hash_ids=[list(t.hash_ids[: r.prompt_len // block]) for t, r in zip(
            reqs, rows, strict=True)])
    return rows, info


def scaled_slo_ms(mean_scaled: float, mean_full: float, cpu_cal: str, cpu_hw: str,
                  cpu_model: str) -> dict:
    """The TTFT SLO for the CPU: `GPU_SLO_MS` x (CPU prefill of the scaled mean prompt) /
    (GPU prefill of the full mean prompt), both one request alone on the latency model."""
    from sglang_duet.latency import Batch, Calibration, LatencyModel, get_hardware
    from sglang_duet.latency.model import ModelSpec, get_model

    cpu = LatencyModel(get_hardware(cpu_hw), ModelSpec.from_hf_config(cpu_model),
                       Calibration.load(cpu_cal))
    gpu = LatencyModel(get_hardware("h100-sxm"), get_model("qwen3-8b"),
                       Calibration.load("published-h100"))
    c_s = cpu.predict(Batch([round(mean_scaled)], [0])).total_s
    g_s = gpu.predict(Batch([round(mean_full)], [0])).total_s
    return {"ttft_slo_ms": round(GPU_SLO_MS * c_s / g_s, -1), "cpu_prefill_s": round(c_s, 4),
            "gpu_prefill_s": round(g_s, 4), "mean_scaled": mean_scaled, "mean_full": mean_full}


def attainment(ttft_ms: Sequence[float | None], prompt_lens: Sequence[int],
               slo_ms: float) -> dict:
    """TTFT attainment of one run, request i's TTFT at i (None: failed or unfinished, a miss):
    the share within `slo_ms`, P99 and max over the finished, and the share within the SLO of
    the longest tenth of prompts (ceil(n / 10) requests; ties: the earlier request)."""
    n = len(ttft_ms)
    if n != len(prompt_lens) or n == 0:
        raise ValueError("one TTFT per prompt, at least one")
    done = np.array([t for t in ttft_ms if t is not None], np.float64)
    ok = [t is not None and t <= slo_ms for t in ttft_ms]
    longest = sorted(range(n), key=lambda i: (-prompt_lens[i], i))[: math.ceil(n / 10)]
    return {
        "requests": n, "finished": int(done.size), "within_slo": int(sum(ok)),
        "attainment": round(sum(ok) / n, 4),
        "ttft_p50_ms": round(float(np.percentile(done, 50)), 1) if done.size else None,
        "ttft_p99_ms": round(float(np.percentile(done, 99)), 1) if done.size else None,
        "ttft_max_ms": round(float(done.max()), 1) if done.size else None,
        "longest_tenth_attainment": round(sum(ok[i] for i in longest) / len(longest), 4),
    }


def bench_ttfts(path: str, n: int) -> list[float | None]:
    """Per-request TTFTs (ms) from bench_serving's JSONL (`--output-details`: lists in request
    order); a request with an error, or none recorded, is None."""
    with open(path) as f:
        res = json.loads(f.read().strip().splitlines()[-1])
    ttfts, errors = res.get("ttfts") or [], res.get("errors") or []
    out: list[float | None] = []
    for i in range(n):
        t = ttfts[i] if i < len(ttfts) else None
        bad = i < len(errors) and errors[i]
        out.append(None if bad or not t else round(float(t) * 1e3, 1))
    return out


def simulate(c: Compared, cfg: Config, rows: list[ReplayRequest], info: dict, slo_ms: float,
             calibration: str | None = None, hardware: str | None = None) -> dict:
    """The simulator's run of the same requests: its attainment, or why there is none. Its
    prefix cache gets the slice's blocks at their scaled size (`info`: `build_requests`; the
    simulator's own block is Mooncake's 512 tokens, `sim.prefix_cache.BLOCK_TOKENS`)."""
    import functools
    from dataclasses import replace

    from benchmark.sim_to_real.simulate import simulate_point
    from benchmark.sim_to_real.workload import to_workload
    from sglang_duet.sim import costs
    from sglang_duet.sim.schedule import SGLANG_ORDERS

    order = c.sim.get("schedule_policy")
    if order is not None and order not in SGLANG_ORDERS:
        return {"error": f"the simulator has no --schedule-policy {order} yet"}
    model, hw, cal = profile_paths(cfg.profile_dir, c.calibration)
    wl = replace(to_workload(rows, c.name), hash_ids=info["hash_ids"])
    block_cache, costs.PrefixCache = costs.PrefixCache, functools.partial(
        costs.PrefixCache, info["mooncake_block_tokens"])
    try:
        res = simulate_point(c.sim_system, wl, model, hardware or hw, calibration or cal,
                             cfg.chunk,
                             cfg.kv_tokens, page_size=1,
                             overrides={**c.sim, "ttft_slo_ms": slo_ms})
    finally:
        costs.PrefixCache = block_cache
    out = attainment(res["ttft_ms_by_request"], [r.prompt_len for r in rows], slo_ms)
    used = os.path.relpath(calibration or cal, str(ROOT))
    out["calibration"] = used if not used.startswith("..") else os.path.basename(used)
    return out


def run(cfg: Config, progress=print, work: str | None = None, argv: list[str] | None = None
        ) -> dict:
    from transformers import AutoTokenizer

    from benchmark.sim_to_real.cpu_meter import set_autogroup_nice
    from benchmark.sim_to_real.pipeline import model_dir

    model = cfg.model or model_dir(cfg)  # type: ignore[arg-type]
    work = work or tempfile.mkdtemp(prefix="duet_admission_")
    os.makedirs(cfg.out_dir, exist_ok=True)
    rows, info = build_requests(cfg, AutoTokenizer.from_pretrained(model), model_max_len(model))
    path = os.path.join(work, "requests.jsonl")
    from benchmark.serving.convert import write_jsonl

    write_jsonl(path, rows)
    lens = [r.prompt_len for r in rows]
    m, hw, cal = profile_paths(cfg.profile_dir, "cpu_calibration.json")
    basis = scaled_slo_ms(info["mean_input"], info["trace_mean_input"], cal, hw, m)
    slo = cfg.ttft_slo_ms or basis["ttft_slo_ms"]
    progress(f"[admission] {len(rows)} requests from {TRACE}[{info['start']}:], prompts "
             f"{info['prompt_pct']}, {cfg.qps:g} req/s, TTFT SLO {slo:g} ms")
    systems: dict[str, dict] = {}
    kept = _kept(cfg)
    old = set_autogroup_nice("self", cfg.nice) if cfg.nice and not cfg.sim_only else None
    try:
        for name in cfg.systems:
            c = compared(slo)[name]
            entry: dict = {"sim": simulate(c, cfg, rows, info, slo)}
            shared = replace(c, calibration=SHARED_PROFILE)
            entry["sim_shared"] = entry["sim"] if shared == c else simulate(
                shared, cfg, rows, info, slo)
            progress(f"[admission] {name}: sim {_brief(entry['sim'])}")
            if name in kept:
                entry.update({k: v for k, v in kept[name].items()
                              if k not in ("sim", "sim_contended")})
                progress(f"[admission] {name}: measured run kept from {cfg.keep}")
            elif not cfg.sim_only:
                real = run_system(c.real, model, cfg.chunk, [(cfg.qps, len(rows), path)], work,
                                  progress, cfg.seed, extra=("--max-total-tokens",
                                                             str(cfg.kv_tokens)),
                                  quiet=(cfg.quiet_cores, cfg.quiet_wait_s), nice=cfg.nice,
                                  passes=cfg.passes)
                entry.update(_real_entry(real, c, work, cfg, lens, slo, model))
                fit = refit(cfg.profile_dir, c.calibration, c.real.stock,
                            os.path.join(work, f"server_{name}.log"),
                            os.path.join(work, f"calibration_{name}.json"))
                if fit:
                    entry["sim_refit"] = {**simulate(c, cfg, rows, info, slo,
                                                     calibration=fit["calibration"]),
                                          "heldout_mape": fit["heldout_mape"]}
                progress(f"[admission] {name}: real {_brief(entry.get('real'))}, passes "
                         f"{[_brief(p) for p in entry.get('real_passes', [])]}")
            slow = measured_slowdown(cfg.profile_dir, c.calibration, c.real.stock,
                                     os.path.join(work, f"server_{name}.log"))
            if slow:
                hw2, cal2 = contended_profile(cfg.profile_dir, c.calibration, slow["slowdown"],
                                              work, c.name)
                entry["sim_contended"] = {**simulate(c, cfg, rows, info, slo, cal2, hw2), **slow}
            elif name in kept and kept[name].get("sim_contended"):
                entry["sim_contended"] = kept[name]["sim_contended"]
            systems[name] = entry
    finally:
        if old is not None:
            set_autogroup_nice("self", old)
    info = {k: v for k, v in info.items() if k != "hash_ids"}
    results = {"config": asdict(cfg), "workload": info, "slo": {**basis, "used_ms": slo},
               "systems": systems}
    results["verdict"] = verdict(systems)
    results["command"] = " ".join(["python -m benchmark.sim_to_real.admission", *(argv or [])])
    if kept:  # the command that measured the kept systems
        with open(cfg.keep) as f:
            old_run = json.load(f)
        results["measured_command"] = old_run.get("measured_command") or old_run.get("command")
    prefix = os.path.join(cfg.out_dir, cfg.tag + ("_sim" if cfg.sim_only else ""))
    write_result(prefix + ".json", results)
    with open(prefix + ".md", "w") as f:
        f.write(markdown(results))
    results["outputs"] = [prefix + ".json", prefix + ".md"]
    return results


def _brief(d: dict | None) -> dict | None:
    return None if d is None else {k: v for k, v in d.items() if k != "ttft_ms"}


WORKLOAD_FIELDS = ("requests", "qps", "scale", "ttft_slo_ms", "chunk", "kv_tokens", "seed",
                   "model")


def _kept(cfg: Config) -> dict[str, dict]:
    """The measured entries of `cfg.keep` (same workload fields, else an error)."""
    if not cfg.keep:
        return {}
    with open(cfg.keep) as f:
        old = json.load(f)
    differ = [k for k in WORKLOAD_FIELDS if old["config"].get(k) != getattr(cfg, k)]
    if differ:
        raise ValueError(f"{cfg.keep} ran another workload (differs in {differ})")
    return {k: v for k, v in old["systems"].items() if v.get("real")}


def _real_entry(real: dict, c: Compared, work: str, cfg: Config, lens: list[int], slo: float,
                model: str) -> dict:
    """The measured side: each pass's attainment (`real_passes`, with its TTFTs in slice order
    and what `cpu_meter` saw), and `real`: all passes' requests pooled (its attainment is the
    passes' mean), with the server's mean wait share."""
    out = {k: real.get(k) for k in ("status", "reason", "start_s", "settings",
                                    "autogroup_nice") if real.get(k) is not None}
    out["command"] = (real.get("command") or "").replace(model, "MODEL")
    runs = (real.get("runs") or []) + (real.get("repeat_runs") or [])
    passes, pooled = [], []
    for k, run in enumerate(runs):
        bench = os.path.join(work, f"bench_{c.name}_qps{cfg.qps:g}{'_2' if k else ''}.jsonl")
        if run.get("metrics") and os.path.exists(bench):
            ttft = bench_ttfts(bench, len(lens))
            passes.append({**attainment(ttft, lens, slo), "cpu": run.get("cpu"),
                           "duration_s": run["metrics"].get("duration_s"), "ttft_ms": ttft})
            pooled += ttft
        elif run.get("error"):
            out.setdefault("errors", []).append(run["error"])
    if passes:
        out["real_passes"] = passes
        waits = [(p["cpu"] or {}).get("server_wait_share") for p in passes]
        out["real"] = {**attainment(pooled, lens * len(passes), slo), "passes": len(passes),
                       "cpu": {"server_wait_share": round(float(np.mean(waits)), 4)
                               if None not in waits else None}}
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse
    import signal
    import sys

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: sys.exit(143))
    d = Config()
    p = argparse.ArgumentParser(prog="python -m benchmark.sim_to_real.admission",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=d.requests)
    p.add_argument("--qps", type=float, default=d.qps, help="the overload point (req/s)")
    p.add_argument("--scale", type=float, default=d.scale, help="trace length scale")
    p.add_argument("--ttft-slo-ms", type=float, default=0.0,
                   help="0: scaled from the GPU's 10 s (module docstring)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--systems", default=",".join(d.systems))
    p.add_argument("--model", default="", help="model dir (default: the embedded cpu-bench)")
    p.add_argument("--tag", default=d.tag)
    p.add_argument("--out-dir", default=RESULTS_DIR)
    p.add_argument("--work-dir", default=None)
    p.add_argument("--sim-only", action="store_true", help="predictions only, no server")
    p.add_argument("--keep", default="", help="a results JSON of the same workload: take its "
                   "measured systems from it, run the others")
    p.add_argument("--nice", type=int, default=d.nice)
    p.add_argument("--quiet-wait-s", type=float, default=d.quiet_wait_s)
    p.add_argument("--passes", type=int, default=d.passes,
                   help="replays per server: the real side's own run-to-run spread")
    a = p.parse_args(argv)
    cfg = Config(requests=a.requests, qps=a.qps, scale=a.scale, ttft_slo_ms=a.ttft_slo_ms,
                 seed=a.seed, systems=[s for s in a.systems.split(",") if s], model=a.model,
                 tag=a.tag, out_dir=a.out_dir, sim_only=a.sim_only, keep=a.keep, nice=a.nice,
                 quiet_wait_s=a.quiet_wait_s, passes=a.passes)
    unknown = set(cfg.systems) - set(compared(1.0))
    if unknown:
        p.error(f"unknown systems {sorted(unknown)}")
    results = run(cfg, work=a.work_dir, argv=sys.argv[1:] if argv is None else argv)
    print("\n".join(f"[admission] wrote {o}" for o in results["outputs"]))
    print(f"[admission] {json.dumps(results['verdict'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
