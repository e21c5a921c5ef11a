"""Decode CUDA graphs captured per SM partition: one SGLang decode graph runner per decode size.

A kernel launched from a CUDA graph runs in the execution context it was captured in: captured on
a green context's stream, it replays on that green context's SMs whichever stream launches it
(`test/partition/test_green_ctx_gpu.py` checks it with an SM-id probe). SGLang captures its
decode graphs once, on an ordinary stream, i.e. on the whole device, so a spatial decode cannot
replay them without leaving its partition. At start-up sglang-duet therefore captures, for each
decode size S_d kept in the menu, one SGLang `DecodeCudaGraphRunner` (all of SGLang's capture
batch sizes) on the decode stream of that split, each with an attention backend of its own: a
backend keeps the per-batch-size state its graphs were captured with, so two runners cannot
share one. The spatial decode of a plan with S_d replays the runner of S_d
(`phases.PhaseRunners.decode`).

Only green contexts: libsmctrl's masks are applied per stream at kernel launch, which a graph
launch does not go through, so with libsmctrl the spatial decode runs eagerly (unverified on a
GPU either way; `benchmark/gpu/check.sh` runs the graph checks).

Cost: start-up time and graph memory grow with the number of sizes (one SGLang decode capture
each), hence `--duet-decode-graph-sizes` keeps a few sizes spread over the menu (the one menu
rule, `partition.plan.menu_for`, which `components.build_menu` and the simulator call; only those
splits are created) and the policy chooses among those only; their memory is taken out of
SGLang's static fraction before it sizes the KV cache (`reserve_for_partitions`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from sglang_duet.partition.plan import GRAPH_BACKENDS, graph_memory_bytes
from sglang_duet.runtime import patches

logger = logging.getLogger(__name__)


class Captured(NamedTuple):
    """{S_d: SGLang decode graph runner} and {S_d: the attention backend it captured with}."""

    runners: dict[int, Any]
    backends: dict[int, Any]


def capture(model_runner: Any, partitions: Any, sizes: Sequence[int]) -> Captured:
    """Captures one decode graph runner per size on that split's decode stream.

    Runs on every TP rank in the same order
    (SGLang's capture synchronises the ranks per batch size). SGLang's side streams (KV pool,
    model helpers) are off during each capture: they belong to the primary context.
    """
    runner_cls = model_runner._decode_cuda_graph_runner_cls()
    runners: dict[int, Any] = {}
    backends: dict[int, Any] = {}
    start = time.perf_counter()
    for s_d in sizes:
        decode_stream, _ = partitions.streams(s_d)
        backend = model_runner._get_attention_backend(init_new_workspace=False)
        t0 = time.perf_counter()
        with (
            patches.capture_on(decode_stream),
            patches.no_side_streams(model_runner),
            patches.swapped(model_runner, attn_backend=backend),
        ):
            runners[s_d] = runner_cls(model_runner, attn_backend=backend)
        backends[s_d] = backend
        logger.info(
            "duet: decode graphs for the %d-SM partition captured in %.1fs (batch sizes %s)",
            s_d, time.perf_counter() - t0, list(getattr(runners[s_d], "capture_bs", [])),
        )
    if sizes:
        logger.info("duet: %d partition decode captures took %.1fs in all", len(sizes),
                    time.perf_counter() - start)
    return Captured(runners, backends)


# ---- start-up memory --------------------------------------------------------------------------

MIB = 1 << 20


def lowered_fraction(fraction: float, reserve: int, device_bytes: int) -> float:
    """SGLang's static memory fraction less `reserve` bytes of a `device_bytes` device."""
    lowered = fraction - reserve / device_bytes
    if lowered <= 0.05:
        raise ValueError(
            f"--mem-fraction-static {fraction:.3f} leaves no room for the partition phases "
            f"({reserve / MIB:.0f} MiB of {device_bytes / MIB:.0f} MiB); lower "
            "--duet-decode-graph-sizes"
        )
    return round(lowered, 4)


def reserve_for_partitions(server_args: Any, duet: Any, device_bytes: int) -> int:
    """Lowers `server_args.mem_fraction_static` (before SGLang sizes the KV cache) by what the
    partition decode graphs and the spatial prefill workspace will need; logged. Returns the
    bytes reserved."""
    n = duet.decode_graph_sizes
    if getattr(server_args, "disable_cuda_graph", False) or duet.mode == "aggregated" or (
        duet.partition_backend not in ("auto", *GRAPH_BACKENDS)
    ):
        n = 0
    decode_cfg = getattr(getattr(server_args, "cuda_graph_config", None), "decode", None)
    max_bs = int(getattr(decode_cfg, "max_bs", 0) or 0)
    workspace = 0
    backends = {server_args.attention_backend, getattr(server_args, "prefill_attention_backend",
                                                       None)}
    if "flashinfer" in backends:
        from sglang.srt.environ import envs

        workspace = int(envs.SGLANG_FLASHINFER_WORKSPACE_SIZE.get())
    reserve = graph_memory_bytes(n, max_bs, workspace)
    if reserve and server_args.mem_fraction_static:
        before = server_args.mem_fraction_static
        after = lowered_fraction(before, reserve, device_bytes)
        # Resolved ServerArgs are read-only except through override() (SGLang publishes them to
        # its runtime context in run_scheduler_process, after this).
        server_args.override("sglang-duet partition reserve", mem_fraction_static=after)
        logger.info(
            "duet: mem_fraction_static %.4f -> %.4f: %.0f MiB kept for %d partition decode "
            "graph pools (max_bs %d) and a %.0f MiB spatial prefill workspace", before,
            server_args.mem_fraction_static, reserve / MIB, n, max_bs, workspace / MIB,
        )
    return reserve
