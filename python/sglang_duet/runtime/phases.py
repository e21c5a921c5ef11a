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
  phase's stream before that phase's results are read (`join`). The join records an event of
  the primary context on a green context's stream, which the `cuEventRecord` docs ask to be of
  one context. Start-up asks the driver first (`partition.events`): a refusal there makes the
  server run with backend `none` (`components.usable_menu`), since SGLang's own decode replay
  records such events too. Should a join still be refused, it falls back to a host sync of the
  phase's stream (`probe_join` asks once more after capture), logged.

The same swaps run on the CPU, one phase after the other on one device, so the CPU tests check
that outputs are unchanged when the phases run with their own state.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sglang_duet.runtime import decode_graphs, patches
from sglang_duet.runtime.patches import swapped

logger = logging.getLogger(__name__)


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
        self.host_join = False  # True: joins sync on the host (events refused across contexts)

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
        runners = cls(model_runner, decode_backend, prefill_backend, graphs, graph_backends,
                      partitions)
        runners.probe_join()
        return runners

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
            patches.no_input_copy(),
            _on(self._stream(sms_decode, 1)),
        ):
            yield

    def join(self, sms_decode: int, side: int) -> None:
        """The current stream waits for the decode (side 0) or prefill (side 1) stream's work."""
        stream = self._stream(sms_decode, side)
        if stream is None:
            return
        if not self.host_join:
            try:
                _current_stream().wait_stream(stream)
                return
            except RuntimeError as exc:
                self._fall_back_to_host_join(exc)
        stream.synchronize()

    def marker(self, sms_decode: int) -> Callable[[], Any] | None:
        """What `lookahead.launch_first` and `launch_rest` call after each decode step, on the
        decode stream: it records an event there, which `wait` makes the current stream wait
        for, so step j's results are read (and streamed) once step j is done. None (join the
        whole stream first): no partitions, or events refused across contexts (`host_join`)."""
        if self._stream(sms_decode, 0) is None or self.host_join:
            return None
        import torch

        def mark() -> Any:
            event = torch.cuda.Event()
            event.record()  # on the current stream: the decode partition's, inside decode()
            return event

        return mark

    @staticmethod
    def wait(event: Any) -> None:
        """The current stream waits for ``event`` (a `marker` mark; None: nothing to wait)."""
        if event is not None:
            _current_stream().wait_event(event)

    def probe_join(self) -> None:
        """Joins each side of one split once, so a driver that refuses cross-context events
        switches the joins to host syncs at start-up rather than in the first spatial step."""
        sizes = getattr(self.partitions, "decode_sizes", ())
        if sizes:
            for side in (0, 1):
                self.join(sizes[0], side)

    def _fall_back_to_host_join(self, exc: Exception) -> None:
        self.host_join = True
        logger.warning(
            "duet: a primary-context event cannot be recorded on a partition stream (%s); "
            "phases join by a host sync of their stream", exc,
        )


def _current_stream() -> Any:
    import torch

    return torch.cuda.current_stream()


@contextlib.contextmanager
def _on(stream: Any) -> Iterator[None]:
    """Runs the block's launches on `stream` after the work already queued on the current one."""
    if stream is None:
        yield
        return
    import torch

    stream.wait_stream(_current_stream())
    with torch.cuda.stream(stream):
        yield
