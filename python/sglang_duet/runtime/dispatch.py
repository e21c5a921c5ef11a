"""`--dp-size N` dispatch by a `sglang_duet.router` router inside SGLang's data-parallel
controller process.

The launcher hands SGLang's engine `run_duet_dp_controller_process` in place of
`run_data_parallel_controller_process` (a module global of `sglang.srt.entrypoints.engine`, set in
our launcher process only). In the controller child it substitutes `DuetDataParallelController`,
a subclass of SGLang's controller that keeps SGLang's start-up, scheduler launch and control
messages and replaces only the per-request dispatch. Replica state comes over SGLang's own path:
every scheduler publishes a `LoadSnapshot` to shared memory after each batch, which the
controller's `load_snapshot_reader` reads (what `--load-balance-method total_tokens` uses).

With `--sleep-on-idle` (the CPU settings set it) the controller also blocks on its socket while
no request is waiting: SGLang's `DataParallelController.event_loop` polls it without blocking in
a loop, one core at 100% for as long as the server is up, whatever the flag says.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import zmq
from sglang.srt.managers import data_parallel_controller as dpc
from sglang.srt.managers.io_struct import sock_recv, sock_send

from sglang_duet.router import NoReplicaError, make_router
from sglang_duet.runtime.router_metrics import RouterMetrics
from sglang_duet.runtime.router_setup import router_context, snapshot_to_load

__all__ = ["DuetDataParallelController", "run_duet_dp_controller_process"]

logger = logging.getLogger("sglang_duet.router")


class DuetDataParallelController(dpc.DataParallelController):
    duet_args: dict[str, Any] = {}  # set by run_duet_dp_controller_process before start-up

    def __init__(self, server_args, port_args, run_scheduler_process_func) -> None:
        super().__init__(server_args, port_args, run_scheduler_process_func)
        name = self.duet_args["router"]
        ctx = router_context(self.duet_args, server_args) if name == "duet" else None
        self.duet_router = make_router(name, server_args.dp_size, ctx)
        self.router_metrics = RouterMetrics(bool(server_args.enable_metrics), server_args.dp_size)
        self._procs_per_replica = max(len(self.scheduler_procs) // server_args.dp_size, 1)
        self.dispatching = self.duet_dispatch
        self.refresh_load_budget_on_dispatch = False
        logger.info("duet: --dp-size %d dispatch by the %s router", server_args.dp_size, name)

    IDLE_POLL_MS = 1000  # how long an idle wait lasts before the soft watchdog is fed again

    def event_loop(self) -> None:
        if not self.server_args.sleep_on_idle:
            return super().event_loop()  # SGLang's spin: the lowest dispatch latency
        sock = self.recv_from_tokenizer
        while True:
            self.soft_watchdog.feed()
            try:
                req = sock_recv(sock, flags=zmq.NOBLOCK)
            except zmq.ZMQError:  # nothing waiting: block until something is
                sock.poll(self.IDLE_POLL_MS, zmq.POLLIN)
                continue
            self._request_dispatcher(req)

    def _refresh(self) -> None:
        r = self.duet_router
        now = time.monotonic()
        if r.due(now):
            r.observe([snapshot_to_load(s) for s in self.load_snapshot_reader.read_all()], now)
            self.router_metrics.loads(r.predicted_loads())

    def _alive(self, replica: int) -> bool:
        k = self._procs_per_replica
        procs = self.scheduler_procs[replica * k:(replica + 1) * k]
        return all(p is None or p.is_alive() for p in procs)

    def duet_dispatch(self, req) -> None:
        if self.maybe_external_dp_rank_routing(req):
            return
        self._refresh()
        r = self.duet_router
        while True:
            try:
                d = r.pick(len(req.input_ids))
            except NoReplicaError:
                logger.error("duet-router: request %s: every replica has exited", req.rid)
                raise
            if self._alive(d.replica) and self.workers[d.replica] is not None:
                break
            r.set_alive(d.replica, False, "its scheduler process exited")
        sock_send(self.workers[d.replica], req)
        self.router_metrics.dispatched(d.replica)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("duet-router: request %s -> replica %d: %s", req.rid, d.replica,
                         d.reason)


def run_duet_dp_controller_process(duet_args: dict[str, Any], **kwargs: Any) -> None:
    """SGLang's `run_data_parallel_controller_process` with our controller class substituted
    (it looks the class up as a module global at call time)."""
    DuetDataParallelController.duet_args = duet_args
    dpc.DataParallelController = DuetDataParallelController
    dpc.run_data_parallel_controller_process(**kwargs)
