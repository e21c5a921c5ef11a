"""The modules of SGLang's CUDA serving path for Qwen3 (and ours) that import without a device;
run as a script it imports each one and prints one JSON line: module -> ok, seconds, error.

Left out, with the reason: `sgl_kernel` (its common_ops links libcuda.so.1, so it cannot load
without a driver; check.sh imports it on the GPU machine) and the model runner's CUDA-only
branches (`if is_cuda():` imports run only where torch sees a device).

    python benchmark/gpu/carry/imports.py MODULE...      # in the environment to check
"""

from __future__ import annotations

MODULES: tuple[str, ...] = (
    # Process roles and entry points (python -m sglang.launch_server, bench_serving).
    "sglang",
    "sglang.launch_server",
    "sglang.srt.server_args",
    "sglang.srt.entrypoints.engine",
    "sglang.srt.entrypoints.http_server",
    "sglang.srt.entrypoints.openai.serving_chat",
    "sglang.srt.entrypoints.openai.serving_completions",
    "sglang.srt.managers.tokenizer_manager",
    "sglang.srt.managers.detokenizer_manager",
    "sglang.srt.managers.scheduler",
    "sglang.srt.managers.tp_worker",
    "sglang.srt.managers.schedule_batch",
    "sglang.srt.managers.schedule_policy",
    "sglang.srt.constrained.xgrammar_backend",
    # Model execution: runner, CUDA graphs, batch layout, memory, loader (dummy weights).
    "sglang.srt.model_executor.model_runner",
    "sglang.srt.model_executor.forward_batch_info",
    "sglang.srt.mem_cache.memory_pool",
    "sglang.srt.mem_cache.radix_cache",
    "sglang.srt.model_loader.loader",
    "sglang.srt.distributed.parallel_state",
    # Qwen3 and its layers; the triton attention backend the GPU check uses.
    "sglang.srt.models.qwen3",
    "sglang.srt.layers.attention.triton_backend",
    "sglang.srt.layers.layernorm",
    "sglang.srt.layers.activation",
    "sglang.srt.layers.rotary_embedding",
    "sglang.srt.layers.linear",
    "sglang.srt.layers.vocab_parallel_embedding",
    "sglang.srt.layers.logits_processor",
    "sglang.srt.layers.sampler",
    "sglang.srt.layers.radix_attention",
    # SGLang's pdmux (the baseline check.sh also runs) and the client.
    "sglang.srt.multiplex.multiplexing_mixin",
    "sglang.srt.multiplex.pdmux_context",
    "sglang.bench_serving",
    "sglang.benchmark.serving",
    "flashinfer.sampling",
    # This project.
    "sgl_duet_kernel",
    "sglang_duet.launch_server",
    "sglang_duet.runtime.scheduler",
    "sglang_duet.runtime.process",
    "sglang_duet.partition",
    "sglang_duet.tiny_model",
)


def _probe(modules: list[str]) -> dict:
    import importlib
    import time
    import traceback

    out = {}
    for name in modules:
        t0 = time.perf_counter()
        try:
            importlib.import_module(name)
            out[name] = {"ok": True, "s": round(time.perf_counter() - t0, 2), "error": None}
        except BaseException as e:  # noqa: BLE001 - report every failure, SystemExit included
            tail = traceback.format_exc().strip().splitlines()[-3:]
            out[name] = {"ok": False, "s": round(time.perf_counter() - t0, 2),
                         "error": f"{type(e).__name__}: {e}"[:400], "trace": tail}
    return out


if __name__ == "__main__":
    import json
    import sys

    import torch

    result = {"python": sys.version.split()[0], "torch": torch.__version__,
              "modules": _probe(sys.argv[1:])}
    # Top-level packages loaded by the whole path: a carried wheel none of whose packages is
    # here is not needed for these imports.
    result["loaded_top_level"] = sorted({m.split(".")[0] for m in sys.modules})
    # Extension modules the carry drops and packages it leaves out (spec.DROPPED_MODULES and
    # UNCARRIED_MODULES, named here so this file runs as a script with nothing else on the
    # path): none may have been loaded.
    dropped = ("sgl_kernel.flash_ops", "sgl_kernel.flashmla_ops", "sgl_kernel.infllm_ops",
               "sglang.srt.server._core", "sglang.srt.grpc._core", "sglang.srt.multimodal._core",
               "llguidance")
    result["loaded_dropped"] = sorted(m for m in dropped if m in sys.modules)
    print(json.dumps(result))
    sys.exit(0 if all(r["ok"] for r in result["modules"].values()) else 1)
