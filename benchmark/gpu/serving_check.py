"""Stage 2 of the GPU check: real SGLang (from the carry folder) serving a Qwen3-8B-shaped model.

    python -m benchmark.gpu.serving_check OUT.json [--only STEPS] [--budget-s S] [--cpu-dry-run]

Steps, in check.sh's order (it runs one per call, `--only`, each under its cap from
benchmark/gpu/plan.py, sharing `--work`); each is folded into OUT.json as soon as it ends:

1. `warmup`: the run's first server, `--duet-mode spatial`. Its start fills the machine's JIT
   (tvm-ffi + nvcc) and triton caches for every later server; it answers 32 concurrent greedy
   prompts, streamed, with top-2 logprobs (kept for `equality`); `delivery` says whether a
   spatial iteration's tokens arrived one step at a time (`delivery.py`; judged on the GPU).
2. `serving`: `benchmark.serving` on an azure-code slice at one QPS point, stock SGLang chunked
   prefill vs sglang-duet (adaptive); arrivals drawn here (`--arrival poisson-replay`) so that
   the simulator's prediction of the same slice (`serving_sim.py`) sits next to each
   measurement (`simulated`, and `sim_vs_real` ratios).
3. `latency_model`: the plan logs (`--duet-plan-log`): predicted vs measured iteration time.
4. `equality` (optional): an aggregated server on the same prompts; equal outputs, or a
   divergence only at a near-tie of the top-2 logprobs (`equality.py`: dummy weights give
   nearly flat logits).
5. `pdmux` (optional): SGLang's pdmux on the same slice.

On the GPU the model is a Qwen3-8B config written here with the embedded tiny model's tokenizer
and `--load-format dummy` (random weights, the same seed in every server); attention is SGLang's
triton backend and sampling pytorch (the carry has no FA3 binary). `--cpu-dry-run` runs the same
steps on the CPU with the embedded tiny model, small and fast, so the logic is tested without a
GPU (test/benchmark/gpu/test_serving_check.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmark.gpu.delivery import delivery_summary, stream_generate
from benchmark.gpu.equality import compare_with_margin
from benchmark.gpu.plan_log import read_plan_log, summarize_plan_log
from benchmark.gpu.serving_sim import attach_predictions
from benchmark.stamp import write_result

# Qwen3-8B's published config.json (hidden, layers, heads, vocab); weights are random.
QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
    "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "hidden_act": "silu",
    "max_position_embeddings": 40960, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "attention_bias": False,
    "bos_token_id": 151643, "eos_token_id": 151645,
}


@dataclass(frozen=True)
class Plan:
    """Sizes of one run: GPU (real) or CPU dry run."""

    prompts: int = 32
    prompt_lens: tuple[int, int] = (128, 2048)  # tokens, drawn uniformly
    new_tokens: int = 32
    # one QPS point: the stage's budget (benchmark/gpu/plan.py) holds two server starts and one
    # bench run each
    qps: tuple[float, ...] = (3.0,)
    bench_requests: int = 40
    scale: float = 1.0  # trace length scale
    systems: tuple[str, ...] = ("sglang-chunked", "duet")  # the `serving` step: both must run
    optional_systems: tuple[str, ...] = ("sglang-pdmux",)  # the `pdmux` step, with time left
    server_args: tuple[str, ...] = ("--load-format", "dummy", "--attention-backend", "triton",
                                    "--sampling-backend", "pytorch", "--cuda-graph-max-bs", "32")
    duet_args: tuple[str, ...] = ("--duet-decode-graph-sizes", "2")
    chunk: int | None = None  # --chunked-prefill-size (None: SGLang's default)
    # per-step token delivery is judged where the decode runs on its own CUDA stream (the GPU)
    judge_delivery: bool = True


MIN_SYSTEM_S = 40.0  # a server start with warm caches plus one short bench run

# The CPU rehearsal: the embedded tiny model, one QPS point (a bench_serving process costs ~15 s
# here).
CPU_PLAN = Plan(prompts=32, prompt_lens=(8, 120), new_tokens=8, qps=(4.0,), bench_requests=8,
                scale=0.05,
                # The CPU KV pool is sized by --max-total-tokens; SGLang still checks the static
                # fraction against free host memory, which other jobs on a shared machine move.
                server_args=("--mem-fraction-static", "0.3"), duet_args=(), chunk=128,
                judge_delivery=False)

STEPS = ("warmup", "serving", "latency_model", "equality", "pdmux")  # check.sh's order


def qwen3_8b_dir(out: Path) -> Path:
    """A config.json with Qwen3-8B's shapes plus the embedded tiny model's tokenizer files."""
    from sglang_duet.tiny_model import default_model_path

    tiny = default_model_path()
    out.mkdir(parents=True, exist_ok=True)
    for f in tiny.iterdir():
        if "token" in f.name or f.name == "special_tokens_map.json":
            shutil.copy2(f, out / f.name)
    (out / "config.json").write_text(json.dumps(QWEN3_8B, indent=1))
    return out


def make_prompts(plan: Plan, vocab: int, seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    lo, hi = plan.prompt_lens
    return [rng.integers(10, vocab, int(rng.integers(lo, hi + 1))).tolist()
            for _ in range(plan.prompts)]


def run_prompts(server, prompts: list[list[int]], new_tokens: int, top: int = 2) -> dict:
    """Every prompt at once, streamed: the greedy output ids, each one's token arrivals and,
    per output token, the top-`top` logprobs (equality.py's margin)."""
    def one(p):
        extra: dict = {}
        ids, arr = stream_generate(server.url, p, new_tokens, top_logprobs=top, extra=extra)
        return ids, arr, extra.get("top_logprobs", [])

    with ThreadPoolExecutor(len(prompts)) as pool:
        outs = list(pool.map(one, prompts))
    return {"outputs": [o[0] for o in outs], "arrivals": [o[1] for o in outs],
            "top_logprobs": [o[2] for o in outs]}


def answer_prompts(plan: Plan, model: str, work: Path, mode: str) -> dict:
    """One `--duet-mode MODE` server answers the equality prompts; its outputs, arrivals and
    top-2 logprobs are saved in WORK/equality_MODE.json for the other mode's step."""
    from transformers import AutoConfig

    from sglang_duet.local_server import Server

    vocab = min(AutoConfig.from_pretrained(model).vocab_size, 2048)
    prompts = make_prompts(plan, vocab)
    args = ["--model-path", model, "--duet-mode", mode, "--duet-plan-log",
            str(work / f"plan_{mode}.jsonl"), *plan.server_args, *plan.duet_args]
    if plan.chunk:
        args += ["--chunked-prefill-size", str(plan.chunk)]
    srv = Server(args, log_path=str(work / f"server_{mode}.log"))
    t0 = time.time()
    try:
        srv.start()
        start_s = round(time.time() - t0, 1)
        t1 = time.time()
        got = run_prompts(srv, prompts, plan.new_tokens)
    finally:
        srv.stop()
    got.update(mode=mode, start_s=start_s, generate_s=round(time.time() - t1, 2),
               prompt_lens=[len(p) for p in prompts])
    (work / f"equality_{mode}.json").write_text(json.dumps(got))
    return got


def step_warmup(plan: Plan, model: str, work: Path) -> dict:
    """The first server of the run, `--duet-mode spatial`: its start compiles SGLang's JIT
    kernels (tvm-ffi + nvcc: RoPE has no fallback) and the triton kernels into the machine's
    caches, which every later server reuses, and it runs the riskiest path (partition decode
    graphs beside a prefill) first. It answers the equality prompts (kept for `equality`) and
    its streamed arrivals give the look-ahead delivery check."""
    got = answer_prompts(plan, model, work, "spatial")
    logged = summarize_plan_log(sorted(work.glob("plan_spatial.jsonl.tp0*")))
    delivery = delivery_summary(got["arrivals"], plan_rows(work, "spatial"), plan.judge_delivery)
    print(f"[stage2] delivery: {json.dumps(delivery)}", flush=True)
    spatial = logged["iterations_by_mode"].get("spatial", 0)
    answered = all(len(o) == plan.new_tokens for o in got["outputs"])
    out = {"start_s": got["start_s"], "generate_s": got["generate_s"],
           "iterations_by_mode": logged["iterations_by_mode"], "delivery": delivery,
           "answered": answered, "ok": bool(answered and spatial)}
    if not spatial:
        out["note"] = "the spatial server ran no spatial iteration"
    return out


def step_equality(plan: Plan, model: str, work: Path) -> dict:
    """An aggregated server on the warmup's prompts; equal outputs, or divergence only at a
    near-tie of the top-2 logprobs (equality.py)."""
    saved = work / "equality_spatial.json"
    if not saved.exists():
        return {"ok": False, "error": "no spatial answers: the warmup step did not finish"}
    spatial = json.loads(saved.read_text())
    agg = answer_prompts(plan, model, work, "aggregated")
    result = compare_with_margin(agg["outputs"], spatial["outputs"], agg["top_logprobs"],
                                 spatial["top_logprobs"])
    result.update(start_s=agg["start_s"], generate_s=agg["generate_s"],
                  prompt_lens=spatial["prompt_lens"], new_tokens=plan.new_tokens,
                  delivery_aggregated=delivery_summary(
                      agg["arrivals"], plan_rows(work, "aggregated"), plan.judge_delivery))
    return result


def plan_rows(work: Path, mode: str) -> list[dict]:
    """Every logged plan of one equality server (rank 0)."""
    return [r for path in sorted(work.glob(f"plan_{mode}.jsonl.tp0*")) for r in read_plan_log(path)]


def step_latency(work: Path) -> dict:
    return summarize_plan_log(sorted(work.glob("plan_*.jsonl.tp0*")))


def bench_systems(plan: Plan, names: tuple[str, ...] | None = None) -> list:
    """The compared systems; duet gets the plan's duet flags (fewer captured partition sizes,
    so it starts inside the stage's budget)."""
    from dataclasses import replace

    from benchmark.serving.systems import SYSTEMS

    return [replace(SYSTEMS[s], flags=SYSTEMS[s].flags + plan.duet_args) if s == "duet"
            else SYSTEMS[s] for s in (names or plan.systems)]


def sim_profile(dry_run: bool, work: Path) -> tuple[str, str]:
    """(hardware, calibration) the simulator predicts with: on a GPU the device's built-in
    profile and the published H100/H200 fit; in a CPU dry run this machine's CPU profile and,
    when committed, its fitted calibration (benchmark/results/sim_to_real)."""
    if not dry_run:
        from sglang_duet.runtime.components import detect_hardware

        return detect_hardware("auto", "cuda").name, "published-h100"
    from benchmark.sim_to_real.profile import write_hardware

    hw = write_hardware(work / "cpu_hardware.json")
    cal = Path(__file__).resolve().parents[1] / "results" / "sim_to_real" / "cpu_calibration.json"
    return hw, str(cal) if cal.exists() else "default"


def step_serving(plan: Plan, model: str, work: Path, deadline: float, save,
                 profile: tuple[str, str] = ("h100-sxm", "published-h100"),
                 systems: tuple[str, ...] | None = None) -> dict:
    """One `benchmark.serving` comparison per system (default: the plan's stock SGLang and
    sglang-duet), so each system's runs are saved when it ends; a system starts only with at
    least MIN_SYSTEM_S left. Each system's simulated prediction of the same slice is attached
    as soon as its runs are in. `ok`: every system asked for ran, every QPS with a summary."""
    from benchmark.serving.compare import Config, compare

    systems = systems or plan.systems
    out: dict = {"ok": False, "systems": {}, "sim_vs_real": {}}
    for system in bench_systems(plan, systems):
        left = deadline - time.time()
        if left < MIN_SYSTEM_S:
            out["systems"][system.name] = {"status": "skipped", "runs": [],
                                           "reason": f"only {left:.0f} s left in the stage"}
            continue
        cfg = Config(trace="azure_code", qps=list(plan.qps), systems=[system], model=model,
                     num_requests=plan.bench_requests, scale=plan.scale,
                     chunked_prefill_size=plan.chunk, server_args=list(plan.server_args),
                     ttft_slo_ms=1000.0, tbt_slo_ms=100.0, tag=f"serving_{system.name}",
                     out_dir=str(work / "serving"), warmup_pass=False, run_timeout_s=left,
                     arrival="poisson-replay")
        try:
            res = compare(cfg, progress=lambda m: print(m, flush=True),
                          work=str(work / "serving_work"))
        except Exception as e:  # noqa: BLE001 - compare wrote its JSON before the plots
            saved = Path(cfg.out_dir) / f"{cfg.tag}.json"
            if not saved.exists():
                raise
            res = json.loads(saved.read_text())
            out.setdefault("errors", []).append(f"{system.name}: {type(e).__name__}: {e}")
        out.update(config=res["config"], conversion=res["conversion"])
        out["systems"][system.name] = res["systems"][system.name]
        try:
            table = attach_predictions({"systems": {system.name: out["systems"][system.name]}},
                                       work, model, *profile)
            out["sim_vs_real"].update(table)
            print(f"[stage2] sim/real {system.name}: {json.dumps(table.get(system.name))}",
                  flush=True)
        except Exception as e:  # noqa: BLE001 - a failed prediction must not lose the runs
            out.setdefault("errors", []).append(f"{system.name} simulation: "
                                                f"{type(e).__name__}: {e}")
        save(out)
    out["ok"] = all(
        out["systems"].get(s, {}).get("status") == "ran"
        and all(r["summary"] for r in out["systems"][s]["runs"]) for s in systems)
    save(out)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmark.gpu.serving_check", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="JSON file to write (rewritten after every step)")
    p.add_argument("--budget-s", type=float, default=300.0)
    p.add_argument("--cpu-dry-run", action="store_true",
                   help="the same steps on the CPU with the embedded tiny model")
    p.add_argument("--work", default=None, help="server logs and plan logs (default: a temp dir;"
                   " steps run one call at a time share it)")
    p.add_argument("--only", default="", help=f"comma-separated steps to run, of {STEPS}")
    p.add_argument("--skip", default="", help="comma-separated steps to skip")
    a = p.parse_args(argv)
    from sglang_duet.local_server import cuda_available

    if not a.cpu_dry_run and not cuda_available():
        print("serving_check needs a CUDA device (or --cpu-dry-run)", file=sys.stderr)
        return 2
    only = [x for x in a.only.split(",") if x] or list(STEPS)
    if set(only) - set(STEPS):
        p.error(f"unknown steps {sorted(set(only) - set(STEPS))}; steps are {STEPS}")
    plan = CPU_PLAN if a.cpu_dry_run else Plan()
    work = Path(a.work or tempfile.mkdtemp(prefix="duet_stage2_"))
    work.mkdir(parents=True, exist_ok=True)
    if a.cpu_dry_run:
        from sglang_duet.tiny_model import default_model_path

        model = str(default_model_path())
    else:
        model = str(qwen3_8b_dir(work / "qwen3-8b-dummy"))
    deadline = time.time() + a.budget_s
    report: dict = {"mode": "cpu-dry-run" if a.cpu_dry_run else "gpu", "plan": plan.__dict__,
                    "model": model, "work": str(work), "steps": {}}

    def partial(name):
        def save(result: dict) -> None:
            report["steps"][name] = result
            write_result(a.out, report)
        return save

    def serving(systems):
        return step_serving(plan, model, work, deadline, partial(name),
                            sim_profile(a.cpu_dry_run, work), systems)

    run = {"warmup": lambda: step_warmup(plan, model, work),
           "serving": lambda: serving(plan.systems),
           "latency_model": lambda: step_latency(work),
           "equality": lambda: step_equality(plan, model, work),
           "pdmux": lambda: serving(plan.optional_systems)}
    ok = True
    for name in STEPS:
        if name not in only or name in a.skip.split(","):
            continue
        if time.time() > deadline - 10:
            report["steps"][name] = {"ok": False, "error": "time budget spent"}
            ok = False
        else:
            t0 = time.time()
            try:
                report["steps"][name] = run[name]()
            except Exception as e:  # noqa: BLE001 - record it, keep the earlier steps' results
                report["steps"][name] = {"ok": False, "error": f"{type(e).__name__}: {e}"[-2000:]}
            report["steps"][name]["seconds"] = round(time.time() - t0, 1)
            ok = ok and report["steps"][name].get("ok", True) is not False
        report["ok"] = ok
        write_result(a.out, report)
        print(f"[stage2] {name}: {json.dumps(report['steps'][name])[:600]}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
