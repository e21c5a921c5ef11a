"""xPyD disaggregation (Dynamo): x prefill workers, y decode workers, KV moved between them.

A finished prefill is handed to the decode worker with the least outstanding work (ties: the
lowest index), waits in that worker's inbox until the worker has pages for it, then its KV
crosses the worker's link (FIFO, ``setup + tokens x kv_bytes_per_token / throughput``); the
first token reaches the user when the transfer lands, and the request decodes from the decode
worker's next iteration on. The prefill worker holds the request's pages until it lands.

One link per decode worker, at the throughput of all transfers into it together: the measured
NixlConnector figure (vllm-project/vllm#50913: 3P1D into one decode worker, 4.3 GB/s aggregate,
6.7 ms post time per transfer) is a per-receiver rate. Faster settings a user would pick:
``NixlPushConnector`` on a shared node, 49 GB/s (vllm-project/vllm#52607, raw CUDA peer-copy
speed), and NVLink itself (H100 NVLink 4: 450 GB/s per direction; UCX's cuda_ipc transport
declares 400 GB/s, vllm-project/vllm#26382). Times are seconds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from .kvcache import pages_for
from .replica import Replica
from .request import Request

__all__ = ["Disagg"]


class _Link:
    """A decode worker's inbox and the FIFO link that fills it."""

    __slots__ = ("inbox", "inflight", "free_at")

    def __init__(self) -> None:
        self.inbox: deque[Request] = deque()
        self.inflight: deque[float] = deque()  # landing times, in order
        self.free_at = 0.0


class Disagg:
    """The KV hand-off between the prefill and the decode workers of one cluster."""

    def __init__(self, prefill: list[Replica], decode: list[Replica], s_per_token: float,
                 setup_s: float, push: Callable[[float, Request, int], None]) -> None:
        self.prefill, self.decode = prefill, decode
        self.links = {d.idx: _Link() for d in decode}
        self._s_per_token, self._setup_s = s_per_token, setup_s
        self._push = push  # (landing time, request, decode worker index) -> an XFER event
        self._p_pages: dict[str, tuple[Replica, int]] = {}
        self.transfers = 0
        self.transfer_s = 0.0

    def hand_off(self, prefill_rep: Replica, r: Request, now: float) -> None:
        """``r`` finished its prefill on ``prefill_rep``: queue it for a decode worker."""
        self._p_pages[r.rid] = (prefill_rep, r.pages)
        r.pages = 0
        d = min(self.decode, key=lambda rep: (rep.outstanding + sum(
            x.remaining_out for x in self.links[rep.idx].inbox), rep.idx))
        self.links[d.idx].inbox.append(r)
        self.try_transfers(now, d)

    def try_transfers(self, now: float, only: Replica | None = None) -> None:
        """Start every queued transfer whose decode worker has pages for it."""
        for d in (only,) if only is not None else self.decode:
            link = self.links[d.idx]
            while link.inbox:
                r = link.inbox[0]
                pages = pages_for(r.base, d.page)
                # leave one page per decode for its next step (SGLang/vLLM would retract)
                if pages + len(d.running) + len(d.joiners) > d.kv.free:
                    break
                link.inbox.popleft()
                d.kv.alloc(pages)
                r.pages = pages
                dur = self._setup_s + r.base * self._s_per_token
                link.free_at = max(now, link.free_at) + dur
                link.inflight.append(link.free_at)
                self.transfers += 1
                self.transfer_s += dur
                self._push(link.free_at, r, d.idx)

    def landed(self, r: Request, d: Replica, now: float) -> Replica:
        """The KV of ``r`` reached ``d``; returns the prefill worker that released it."""
        self.links[d.idx].inflight.popleft()
        rep, pages = self._p_pages.pop(r.rid)
        rep.release_transferred(pages)
        r.first_token_s = now
        if r.remaining_out <= 0:
            r.open_run(d.idx, now, 0)
            r.close_run(0)
            r.finish_s = now
            d.kv.release(r.pages)
            r.pages = 0
            d.finished.append(r)
        else:
            r.open_run(d.idx, now, -1)
            d.join_decoding(r)
        return rep

    def next_landing(self, d: Replica) -> float:
        link = self.links[d.idx]
        return link.inflight[0] if link.inflight else float("inf")
