"""What each phase of a spatial iteration runs with: attention backend, graphs, inputs, stream.

With partitions, the decode (k look-ahead steps) and the prefill of one iteration run at the same
time on two streams, so they must share no state that a forward writes:

* attention backend: a forward's metadata buffers (and flashinfer's workspace) are written when
  it is prepared and read by its kernels. The spatial decode uses backends of its own (one per
  captured partition size, else one for all), the spatial prefill one with its own workspace.
  SGLang's own backend, and its whole-device graphs, serve aggregated and decode-only iterations.
* input buffers: SGLang's eager runner copies each batch into process-wide input buffers that its
  decode graphs share; the spatial prefill runs on the batch's own tensors instead (SGLang's
  no-copy eager input, the same path its PD-multiplexing takes) and skips SGLang's prefill graphs
  (captured on the whole device).
* streams: partition streams are non-blocking, so each phase's stream first waits for the
  scheduler's stream (where the batches were prepared), and the scheduler's stream waits for a
  phase's stream before that phase's results are read (`join`).

The same swaps run on the CPU, one phase after the other on one device, so the CPU tests check
that outputs are unchanged when the phases run with their own state.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from typing import Any

from sglang_duet.runtime import decode_graphs

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def swapped(obj: Any, **attrs: Any) -> Iterator[None]:
    """Sets attributes of `obj` for the duration of the block and restores them afterwards."""
    saved = {name: getattr(obj, name) for name in attrs}
    for name, value in attrs.items():
        setattr(obj, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(obj, name, value)


@contextlib.contextmanager
def _no_input_copy() -> Iterator[None]:
    """SGLang's eager runner reads this switch per forward (from the environment); its own
    `override` does not restore it when the block raises, hence the try/finally here."""
    from sglang.srt.environ import envs

    switch = envs.SGLANG_EAGER_INPUT_NO_COPY
    saved = os.environ.get(switch.name)
    switch.set(True)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(switch.name, None)
        else:
            os.environ[switch.name] = saved


class PhaseRunners:
    """Phase state of one scheduler's model runner (one TP rank).

    `decode_backend`: eager decode on a partition (sizes without graphs, batches larger than the
    largest captured one). `graphs` / `graph_backends`: {S_d: SGLang decode graph runner / its
    attention backend}. `partitions`: the PartitionMenu whose streams the phases run on, or None
    (CPU, backend none): then both run on the current stream, one after the other.
    """

    def __init__(
        self,
        model_runner: Any,
        decode_backend: Any,
        prefill_backend: Any,
        graphs: dict[int, Any] | None = None,
        graph_backends: dict[int, Any] | None = None,
        partitions: Any = None,
    ) -> None:
        self.model_runner = model_runner
        self.decode_backend = decode_backend
        self.prefill_backend = prefill_backend
        self.graphs = graphs or {}
        self.graph_backends = graph_backends or {}
        self.partitions = partitions

    @classmethod
    def build(
        cls, model_runner: Any, partitions: Any = None, graph_sizes: Sequence[int] = ()
    ) -> PhaseRunners:
        """Makes the phases' attention backends and captures decode graphs for `graph_sizes`."""
        decode_backend = model_runner._get_attention_backend(init_new_workspace=False)
        prefill_backend = model_runner._get_attention_backend(init_new_workspace=True)
        graphs, graph_backends = (
            decode_graphs.capture(model_runner, partitions, graph_sizes)
            if graph_sizes
            else ({}, {})
        )
        return cls(model_runner, decode_backend, prefill_backend, graphs, graph_backends,
                   partitions)

    def _stream(self, sms_decode: int, side: int) -> Any:
        if self.partitions is None:
            return None
        return self.partitions.streams(sms_decode)[side]

    @contextlib.contextmanager
    def decode(self, sms_decode: int) -> Iterator[None]:
        """Launches in the block are the spatial decode of a plan with `sms_decode` SMs."""
        mr = self.model_runner
        with (
            swapped(
                mr,
                attn_backend=self.graph_backends.get(sms_decode, self.decode_backend),
                decode_cuda_graph_runner=self.graphs.get(sms_decode),
            ),
            _on(self._stream(sms_decode, 0)),
        ):
            yield

    @contextlib.contextmanager
    def prefill(self, sms_decode: int) -> Iterator[None]:
        """Launches in the block are the spatial prefill next to a `sms_decode`-SM decode."""
        with (
            swapped(self.model_runner, attn_backend=self.prefill_backend,
                    prefill_cuda_graph_runner=None),
            _no_input_copy(),
            _on(self._stream(sms_decode, 1)),
        ):
            yield

    def join(self, sms_decode: int, side: int) -> None:
        """The current stream waits for the decode (side 0) or prefill (side 1) stream's work."""
        stream = self._stream(sms_decode, side)
        if stream is not None:
            import torch

            torch.cuda.current_stream().wait_stream(stream)


@contextlib.contextmanager
def _on(stream: Any) -> Iterator[None]:
    """Runs the block's launches on `stream` after the work already queued on the current one."""
    if stream is None:
        yield
        return
    import torch

    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        yield
