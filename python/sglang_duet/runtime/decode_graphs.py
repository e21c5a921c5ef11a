"""Decode CUDA graphs captured per SM partition: one SGLang decode graph runner per decode size.

A kernel launched from a CUDA graph runs in the execution context it was captured in: captured on
a green context's stream, it replays on that green context's SMs whichever stream launches it
(`test/gpu/test_green_ctx.py` checks this with an SM-id probe). SGLang captures its decode graphs
once, on an ordinary stream, i.e. on the whole device, so a spatial decode cannot replay them
without leaving its partition. At start-up sglang-duet therefore captures, for each decode size
S_d kept in the menu, one SGLang `DecodeCudaGraphRunner` (all of SGLang's capture batch sizes)
on the decode stream of that split, each with an attention backend of its own: a backend keeps
the per-batch-size state its graphs were captured with, so two runners cannot share one. The
spatial decode of a plan with S_d replays the runner of S_d (`phases.PhaseRunners.decode`).

Only green contexts: libsmctrl's masks are applied per stream at kernel launch, which a graph
launch does not go through, so with libsmctrl the spatial decode runs eagerly (unverified on a
GPU either way; `benchmark/gpu/check.sh` runs the graph checks).

Cost: start-up time and graph memory grow with the number of sizes (one SGLang decode capture
each), hence `--duet-decode-graph-sizes` keeps a few sizes spread over the menu and the policy
chooses among those only.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

logger = logging.getLogger(__name__)

GRAPH_BACKENDS = ("green-ctx",)


def spread(sizes: Sequence[int], n: int) -> tuple[int, ...]:
    """`n` of `sizes` (ascending) evenly spread from the smallest to the largest, both kept.

    All of them when `n >= len(sizes)`; none when `n <= 0`.
    """
    sizes = sorted(set(sizes))
    if n <= 0 or not sizes:
        return ()
    if n >= len(sizes):
        return tuple(sizes)
    if n == 1:
        return (sizes[0],)
    step = (len(sizes) - 1) / (n - 1)
    return tuple(sorted({sizes[round(i * step)] for i in range(n)}))


def graphs_wanted(backend: str, cuda_graphs: bool, n: int) -> tuple[bool, str]:
    """Whether to capture decode graphs per partition, and why (for the start-up log)."""
    if n <= 0:
        return False, "--duet-decode-graph-sizes 0: spatial decode runs eagerly"
    if not cuda_graphs:
        return False, "SGLang runs decode without CUDA graphs here"
    if backend not in GRAPH_BACKENDS:
        return False, f"partition backend {backend}: graphs would not keep to the partition"
    return True, f"decode graphs for {n} partition sizes"


@contextlib.contextmanager
def _capture_on(stream: Any) -> Iterator[None]:
    """While active, SGLang's decode graph runner captures on `stream` (not a stream of its own).

    `DecodeCudaGraphRunner.capture` opens `graph_capture()` with no stream, which makes one; the
    module's name is rebound to a version that passes ours.
    """
    import sglang.srt.model_executor.runner.decode_cuda_graph_runner as dcgr

    original = dcgr.graph_capture

    def on_partition(*args: Any, **kwargs: Any):
        if not args and kwargs.get("stream") is None:
            kwargs["stream"] = stream
        return original(*args, **kwargs)

    dcgr.graph_capture = on_partition
    try:
        yield
    finally:
        dcgr.graph_capture = original


def capture(
    model_runner: Any, partitions: Any, sizes: Sequence[int]
) -> tuple[dict[int, Any], dict[int, Any]]:
    """Captures one decode graph runner per size on that split's decode stream.

    Returns ({S_d: runner}, {S_d: attention backend}). Runs on every TP rank in the same order
    (SGLang's capture synchronises the ranks per batch size).
    """
    from sglang_duet.runtime.phases import swapped  # phases imports this module

    runner_cls = model_runner._decode_cuda_graph_runner_cls()
    runners: dict[int, Any] = {}
    backends: dict[int, Any] = {}
    for s_d in sizes:
        decode_stream, _ = partitions.streams(s_d)
        backend = model_runner._get_attention_backend(init_new_workspace=False)
        t0 = time.perf_counter()
        with _capture_on(decode_stream), swapped(model_runner, attn_backend=backend):
            runners[s_d] = runner_cls(model_runner, attn_backend=backend)
        backends[s_d] = backend
        logger.info(
            "duet: decode graphs for the %d-SM partition captured in %.1fs (batch sizes %s)",
            s_d, time.perf_counter() - t0, list(getattr(runners[s_d], "capture_bs", [])),
        )
    return runners, backends
