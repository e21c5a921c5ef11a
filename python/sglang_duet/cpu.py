"""What serving needs on a machine without a CUDA device.

The settings are applied by the launcher to every flag the user did not give. The SGLang patches
CPU serving needs (RoPE, process groups without NCCL) live with every other SGLang patch in
`runtime/patches.py` and run inside the scheduler child.
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)

# dest -> (value, why). Measured on sglang 0.5.17 with torch 2.11 (CUDA build, no device).
CPU_SETTINGS: dict[str, tuple[object, str]] = {
    "device": ("cpu", "no CUDA device"),
    "attention_backend": ("torch_native", "the only attention backend that runs on the CPU"),
    "sampling_backend": ("pytorch", "flashinfer sampling needs CUDA"),
    "disable_cuda_graph": (True, "CUDA graphs need CUDA"),
    "dtype": ("float32", "CPUs without AMX have no fast bf16/fp16 matmuls"),
    # SGLang budgets the KV pool as (free memory after the load) - (free memory before it) *
    # (1 - fraction) and refuses to start when that is <= 0. On the CPU "free memory" is the
    # whole machine's, so with 0.05 any other process growing by 5% during our load aborted
    # start-up. 0.5 tolerates that; the explicit token count below still sets the pool's size.
    "mem_fraction_static": (0.5, "KV pool sized by tokens on the CPU"),
    "max_total_tokens": (16384, "KV pool of 16384 tokens"),
    # An idle SGLang scheduler otherwise polls its sockets in a busy loop and pins a core; on a
    # 2-core machine that steals half the CPU from the next forward pass. The sleeper blocks on
    # the same sockets, so a request still wakes it at once.
    "sleep_on_idle": (True, "idle schedulers block on their sockets instead of spinning"),
    # SGLang's default, xgrammar, allocates its token bitmask in pinned memory and applies it only
    # on CUDA-like devices (constrained/xgrammar_backend.py, `_allocate_token_bitmask`,
    # `apply_vocab_mask`): the first constrained step kills the scheduler ("Found no NVIDIA
    # driver"). llguidance masks logits with torch on any device and compiles every grammar kind
    # SGLang offers (json_schema, regex, ebnf, structural tags); outlines has no ebnf or
    # structural tags, so it is not the default.
    "grammar_backend": ("llguidance", "xgrammar's token mask needs CUDA"),
}
# Grammar backends that cannot run without a CUDA device (an explicit choice fails start-up).
CUDA_ONLY_GRAMMAR_BACKENDS = ("xgrammar",)


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def apply_cpu_settings(ns, explicit: set[str]) -> list[str]:
    """Set CPU_SETTINGS on the argparse namespace where the user gave no value; log each."""
    applied = []
    for dest, (value, why) in CPU_SETTINGS.items():
        if dest in explicit:
            logger.info("cpu: keeping %s=%r given on the command line", dest, getattr(ns, dest))
            continue
        setattr(ns, dest, value)
        applied.append(dest)
        logger.info("cpu: %s=%r (%s)", dest, value, why)
    return applied


def bind_cpu_threads(tp_size: int, environ=os.environ) -> str | None:
    """SGLang on the CPU binds each TP rank's OpenMP threads to its own cores and refuses TP
    larger than the NUMA node count unless SGLANG_CPU_OMP_THREADS_BIND lists the cores per rank.
    Split this machine's cores evenly among the ranks (sharing cores when there are fewer)."""
    key = "SGLANG_CPU_OMP_THREADS_BIND"
    if tp_size <= 1 or environ.get(key):
        return None
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(
        range(os.cpu_count() or 1))
    per = max(1, len(cores) // tp_size)
    groups = []
    for rank in range(tp_size):
        chunk = cores[(rank * per) % len(cores):][:per] or cores[:per]
        groups.append(f"{chunk[0]}-{chunk[-1]}" if len(chunk) > 1 else str(chunk[0]))
    value = "|".join(groups)
    environ[key] = value
    logger.info("cpu: %s=%s (cores per TP rank)", key, value)
    return value

