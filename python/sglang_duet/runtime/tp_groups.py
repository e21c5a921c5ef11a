"""A second TP communicator for the prefill phase, for spatial iterations with TP > 1 on a GPU.

When decode and prefill run at the same time on two partition streams, their all-reduces must
not share one NCCL communicator (two streams enqueuing on one communicator can interleave and
deadlock). SGLang already knows how to build a duplicate TP group for its PD-multiplexing mode and
to route `get_tp_group()` to it; sglang-duet asks for that group at start-up and switches to it
only while it launches the prefill batch. Only active with CUDA, TP > 1 and a partition backend.
"""

from __future__ import annotations

import contextlib
import functools
import logging

logger = logging.getLogger(__name__)


def request_prefill_tp_group() -> None:
    """Patch (in the scheduler child, before the model runner starts) SGLang's bootstrap so that
    it creates the duplicate TP group as if PD-multiplexing were on."""
    import sglang.srt.distributed.bootstrap as bootstrap

    original = bootstrap.initialize_model_parallel
    if getattr(original, "_duet", False):
        return

    @functools.wraps(original)
    def with_prefill_group(*args, **kwargs):
        kwargs["duplicate_tp_group"] = True
        return original(*args, **kwargs)

    with_prefill_group._duet = True  # type: ignore[attr-defined]
    bootstrap.initialize_model_parallel = with_prefill_group
    logger.info("duet: a second TP communicator will be built for the prefill phase")


def has_prefill_tp_group() -> bool:
    import sglang.srt.distributed.parallel_state as ps

    return getattr(ps, "_PDMUX_PREFILL_TP_GROUP", None) is not None


@contextlib.contextmanager
def prefill_tp_group(enabled: bool):
    """While active, SGLang's get_tp_group() returns the prefill phase's communicator."""
    if not enabled:
        yield
        return
    from sglang.srt.distributed.parallel_state import set_pdmux_status

    set_pdmux_status(True)
    try:
        yield
    finally:
        set_pdmux_status(False)
