"""Whether events of the primary CUDA context work on a menu's partition streams.

A partition stream belongs to a green context, and the `cuEventRecord` documentation asks for an
event and a stream of one context. SGLang records primary-context events on whatever stream is
current: every decode-graph replay records one (`decode_cuda_graph_runner.py`, its WAR
`read_done` event), and torch's pinned-memory copies record one on the copy's stream; the
phases' joins record and wait for them too (`runtime.phases`). A driver that refuses them makes
the partitions unusable for SGLang's forward itself, not only for the joins, so start-up asks
once, on one split, and the server falls back to partition backend `none`
(`runtime.components.build_menu`).
"""

from __future__ import annotations

from typing import Any


def cross_context_events(menu: Any) -> str:
    """"" when an event of the current (primary) context can be recorded on each stream of the
    menu's first split and waited for by the current stream, and the other way round; else the
    driver's error, as torch raised it."""
    sizes = menu.decode_sizes
    if not sizes:
        return ""
    import torch

    try:
        current = torch.cuda.current_stream()
        for stream in menu.streams(sizes[0]):
            on_partition = torch.cuda.Event()
            on_partition.record(stream)
            current.wait_event(on_partition)
            on_current = torch.cuda.Event()
            on_current.record(current)
            stream.wait_event(on_current)
            stream.synchronize()
        current.synchronize()
    except RuntimeError as exc:
        return str(exc) or type(exc).__name__
    return ""
