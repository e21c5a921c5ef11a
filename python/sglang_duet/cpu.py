"""What serving needs on a machine without a CUDA device, and the one patch SGLang needs there.

The settings are applied by the launcher to every flag the user did not give; the RoPE patch runs
inside the scheduler child (processes are spawned, so a patch made in the parent never reaches it).
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

# dest -> (value, why). Measured on sglang 0.5.17 with torch 2.11 (CUDA build, no device).
CPU_SETTINGS: dict[str, tuple[object, str]] = {
    "device": ("cpu", "no CUDA device"),
    "attention_backend": ("torch_native", "the only attention backend that runs on the CPU"),
    "sampling_backend": ("pytorch", "flashinfer sampling needs CUDA"),
    "disable_cuda_graph": (True, "CUDA graphs need CUDA"),
    "dtype": ("float32", "CPUs without AMX have no fast bf16/fp16 matmuls"),
    # SGLang sizes the KV pool from a fraction of device memory, which can come out negative on
    # the CPU; a small fraction plus an explicit token count sizes it by tokens instead.
    "mem_fraction_static": (0.05, "KV pool sized by tokens on the CPU"),
    "max_total_tokens": (16384, "KV pool of 16384 tokens"),
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
