"""For each system: start the server, run bench_serving at every QPS, stop it; then report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from benchmark.serving import report
from benchmark.serving.convert import (
    TIMESTAMPED,
    PromptBuilder,
    convert,
    model_max_len,
    sample,
    write_jsonl,
)
from benchmark.serving.metrics import summarize
from benchmark.serving.systems import System, make_server, unavailable_reason
from benchmark.serving.traces import load_trace
from benchmark.stamp import write_result
from sglang_duet.local_server import ROOT, child_env, cuda_available

RESULTS_DIR = os.path.join(ROOT, "benchmark", "results", "serving")


@dataclass
class Config:
    trace: str
    qps: list[float]
    systems: list[System]
    model: str
    num_requests: int = 50
    scale: float = 1.0
    output_scale: float | None = None  # None: same as scale
    sample: str = "uniform"
    arrival: str = "poisson"
    seed: int = 0
    tp: int = 1
    chunked_prefill_size: int | None = None
    server_args: list[str] = field(default_factory=list)
    ttft_slo_ms: float = 2000.0
    tbt_slo_ms: float = 100.0
    tag: str = ""
    out_dir: str = RESULTS_DIR
    run_timeout_s: float = 1800.0
    warmup_pass: bool = True  # one unmeasured bench_serving pass per server, at the highest QPS

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["systems"] = [s.name for s in self.systems]
        d["device"] = "gpu" if cuda_available() else "cpu"
        return d


def build_requests(cfg: Config, work: str) -> dict[float, tuple[str, dict]]:
    """One replay file per QPS (Poisson runs share one file); qps -> (path, conversion info)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(cfg.model)
    builder = PromptBuilder(tok, cfg.seed)
    reqs = sample(load_trace(cfg.trace), cfg.num_requests, cfg.sample, cfg.seed)
    if cfg.output_scale is not None and cfg.output_scale != cfg.scale:
        from dataclasses import replace

        ratio = cfg.output_scale / cfg.scale
        reqs = [replace(r, output_len=max(1, round(r.output_len * ratio))) for r in reqs]
    max_len = model_max_len(cfg.model)
    files: dict[float, tuple[str, dict]] = {}
    for q in cfg.qps:
        if cfg.arrival == "poisson" and files:
            files[q] = next(iter(files.values()))
            continue
        rows, info = convert(reqs, tok, cfg.scale, max_len, cfg.arrival, q, cfg.seed, builder)
        path = os.path.join(work, f"requests_qps{q:g}.jsonl")
        write_jsonl(path, rows)
        files[q] = (path, info)
    return files


def run_bench(cfg: Config, url_port: int, replay: str, qps: float, out_file: str,
              log) -> dict:
    cmd = [sys.executable, "-m", "benchmark.serving.replay", "--replay-file", replay]
    if cfg.arrival in TIMESTAMPED:
        cmd.append("--trace-timestamps")
    cmd += ["--", "--backend", "sglang", "--host", "127.0.0.1", "--port", str(url_port),
            "--dataset-name", "custom", "--dataset-path", replay,
            "--num-prompts", str(cfg.num_requests), "--request-rate", f"{qps:g}",
            "--seed", str(cfg.seed), "--model", cfg.model, "--tokenizer", cfg.model,
            "--output-file", out_file, "--output-details", "--disable-tqdm", "--flush-cache",
            "--warmup-requests", "1", "--tag", f"{cfg.trace}-qps{qps:g}"]
    subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env(), cwd=ROOT,
                   timeout=cfg.run_timeout_s, check=True)
    with open(out_file) as f:
        return json.loads(f.read().strip().splitlines()[-1])


def run_system(cfg: Config, system: System, files, work: str, progress) -> dict:
    reason = unavailable_reason(system)
    if reason:
        progress(f"[serving] {system.name}: skipped — {reason}")
        return {"status": "skipped", "reason": reason, "runs": []}
    extra = list(cfg.server_args)
    srv = make_server(system, cfg.model, cfg.tp, cfg.chunked_prefill_size, extra,
                      log_path=os.path.join(work, f"server_{system.name}.log"))
    entry: dict = {"status": "ran", "reason": None, "runs": [], "command": None}
    try:
        t0 = time.time()
        srv.start()
        entry["command"] = " ".join(srv.command()[1:])
        progress(f"[serving] {system.name}: healthy after {time.time() - t0:.0f} s")
        if cfg.warmup_pass:  # first use of new batch shapes stalls steps; keep that out of runs
            q = max(cfg.qps)
            with open(os.path.join(work, f"warmup_{system.name}.log"), "w") as log:
                try:
                    run_bench(cfg, srv.port, files[q][0], q,
                              os.path.join(work, f"warmup_{system.name}.jsonl"), log)
                except (subprocess.SubprocessError, OSError, ValueError, IndexError) as e:
                    progress(f"[serving] {system.name}: warm-up pass failed ({e})")
        for q in cfg.qps:
            replay, info = files[q]
            out_file = os.path.join(work, f"bench_{system.name}_qps{q:g}.jsonl")
            run = {"qps": q, "summary": None, "conversion": info}
            t0 = time.time()
            with open(os.path.join(work, f"bench_{system.name}_qps{q:g}.log"), "w") as log:
                try:
                    result = run_bench(cfg, srv.port, replay, q, out_file, log)
                    run["summary"] = summarize(result, info["requests"], cfg.ttft_slo_ms,
                                               cfg.tbt_slo_ms)
                except (subprocess.SubprocessError, OSError, ValueError, IndexError) as e:
                    run["error"] = f"{type(e).__name__}: {e}"
            entry["runs"].append(run)
            s = run["summary"]
            progress(
                f"[serving] {system.name} qps={q:g}: "
                + (f"{s['completed']}/{s['requests']} done, {s['output_throughput']:.1f} out tok/s,"
                   f" TTFT p50 {s['median_ttft_ms']:.1f} ms, TBT p99 {s['p99_itl_ms']:.1f} ms,"
                   f" SLO {s['slo_attainment']:.2f}" if s else f"FAILED ({run['error']})")
                + f" [{time.time() - t0:.0f} s]")
    except (RuntimeError, TimeoutError) as e:
        entry.update(status="failed", reason=f"server did not start: {str(e)[-800:]}")
        progress(f"[serving] {system.name}: failed to start")
    finally:
        srv.stop()
    return entry


def compare(cfg: Config, progress=print, work: str | None = None) -> dict:
    work = work or tempfile.mkdtemp(prefix="duet_serving_")
    os.makedirs(work, exist_ok=True)
    files = build_requests(cfg, work)
    first_info = next(iter(files.values()))[1]
    progress(f"[serving] {cfg.trace}: {first_info['requests']} requests, mean input "
             f"{first_info['mean_input']:.0f}, mean output {first_info['mean_output']:.0f} tokens "
             f"(scale {cfg.scale:g}); work dir {work}")
    results = {"config": cfg.to_dict(), "conversion": first_info, "work_dir": work,
               "systems": {}}
    for system in cfg.systems:
        results["systems"][system.name] = run_system(cfg, system, files, work, progress)
    tag = cfg.tag or f"{cfg.trace}_{results['config']['device']}"
    prefix = os.path.join(cfg.out_dir, tag)
    write_result(prefix + ".json", results)
    with open(prefix + ".md", "w") as f:
        f.write(f"# {cfg.trace}: {', '.join(s.name for s in cfg.systems)}\n\n")
        f.write(report.table(results))
    results["outputs"] = [prefix + ".json", prefix + ".md", *report.plots(results, prefix)]
    return results
