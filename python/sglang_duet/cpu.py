"""What serving needs on a machine without a CUDA device, and the one patch SGLang needs there.

The settings are applied by the launcher to every flag the user did not give; the RoPE patch runs
inside the scheduler child (processes are spawned, so a patch made in the parent never reaches it).
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
}


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


def patch_rope_for_cpu() -> None:
    """Make SGLang's RotaryEmbedding take its native path on a CPU-only torch build.

    Its constructor imports vLLM's custom op on platforms it does not recognise; a CUDA build of
    torch with no device is such a platform. The native forward is what runs on the CPU anyway.
    """
    import torch

    if torch.cuda.is_available():
        return
    import sglang.srt.layers.rotary_embedding.base as rope_base

    if hasattr(rope_base, "_is_cpu"):
        rope_base._is_cpu = True


def patch_tp_groups_for_cpu() -> None:
    """TP > 1 without a CUDA device: build SGLang's process groups without NCCL communicators.

    SGLang decides "CPU" from SGLANG_USE_CPU_ENGINE (whose kernels are not on PyPI), so with a
    CUDA build of torch and no device it still creates PyNccl and custom all-reduce
    communicators. Forcing them off leaves the gloo CPU group, which is what serves here.
    """
    import torch

    if torch.cuda.is_available():
        return
    import sglang.srt.distributed.parallel_state as ps

    original = ps.init_model_parallel_group
    if getattr(original, "_duet_cpu", False):
        return

    def init_group_without_nccl(*args, **kwargs):
        kwargs["use_pynccl"] = False
        kwargs["use_custom_allreduce"] = False
        kwargs["use_mscclpp_allreduce"] = False
        kwargs["use_torch_symm_mem_allreduce"] = False
        return original(*args, **kwargs)

    init_group_without_nccl._duet_cpu = True  # type: ignore[attr-defined]
    ps.init_model_parallel_group = init_group_without_nccl
