"""The event-heap loop: arrivals, iteration ends, KV transfers, deferred iteration starts.

Events at the same time are handled in this order (the ``kind`` field of a heap entry):
``END`` (an iteration finishes; frees KV) < ``XFER`` (a 1P1D KV transfer lands) < ``READY`` (a
request leaves its front end for the scheduler, `frontend.py`) < arrivals < ``START`` (an idle
replica begins its next iteration). So a replica that frees up at time t
starts its next iteration only after every arrival at t is queued. Arrivals are not heap entries:
they are a sorted array merged into the loop. Ties within a kind go by insertion order.

Topologies: ``aggregated`` puts ``gpus / tp`` identical replicas behind the router;
``disagg`` (Dynamo xPyD) runs ``disagg_prefill`` prefill and ``disagg_decode`` decode workers of
``gpus / (x + y)`` GPUs each (TP = that), the prefill workers behind the router and the KV moved
by ``disagg.Disagg``.

Duet's SM partitions are the ones the runtime builds for ``partition_backend``
(``partition.plan.plan_menu``, the rule ``runtime.components.build_menu`` applies), with their
decode-graph memory kept out of the KV pool as the runtime keeps it
(``partition.plan.graph_memory_bytes``) and the spatial decode step's host time that of a graph
replay only on graph sizes. A baseline that captures more decode graphs than SGLang's usual
one (pdmux: one set per stream group) has them kept out by the same estimate
(``PolicySpec.extra_graphs``).
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sglang_duet.latency import Calibration, LatencyModel, get_hardware
from sglang_duet.latency.model import resolve_model
from sglang_duet.partition.plan import MenuPlan, menu_for, plan_menu
from sglang_duet.partition.sizes import GPU_SHAPES, tpc_granularity

from .arrivals import Workload
from .config import SimConfig
from .costs import RunCosts
from .disagg import Disagg
from .executor import Executor
from .frontend import FrontEnd
from .kvcache import PAGE_SIZE, KvCache, KvSizing, pages_for, size_kv_cache
from .policies import PlanContext, PolicySpec, check_config, get_policy
from .replica import Replica
from .request import Request
from .router import SimRouter
from .schedule import duet_admission, queue_order

__all__ = ["SimResult", "Simulation", "simulate"]

END, XFER, READY, ARRIVAL, START = 0, 1, 2, 3, 4
INF = math.inf


@dataclass
class SimResult:
    policy: str
    requests: list[Request]
    replicas: list[Replica]
    sizing: KvSizing
    replica_tp: int
    wall_s: float
    transfers: int = 0
    transfer_s: float = 0.0
    extra: dict[str, object] = field(default_factory=dict)
    frontend: FrontEnd | None = None  # token delivery for the metrics (sim/frontend.py)


class Simulation:
    """One policy over one workload. ``run()`` replays every request to completion."""

    def __init__(self, cfg: SimConfig, workload: Workload, policy: str | PolicySpec | None = None,
                 reuse_predictions: bool = True, own_horizon: bool = True) -> None:
        """``reuse_predictions`` and ``own_horizon`` are speed-ups that leave results unchanged
        (tests compare both settings): reuse the planner's predictions when they are the
        executor's, and let a replica's decode stretch run to the next arrival *it* will get
        (known in advance under round-robin) rather than the next arrival anywhere."""
        cfg.validate()
        self.cfg = cfg
        self.workload = workload
        self.spec: PolicySpec = (policy if isinstance(policy, PolicySpec)
                                 else get_policy(policy or cfg.policy))
        hw = get_hardware(cfg.hardware)
        disagg = self.spec.topology == "disagg"
        workers = cfg.disagg_prefill + cfg.disagg_decode
        if not isinstance(policy, PolicySpec):
            check_config(cfg, self.spec.name)
        self.replica_tp = cfg.gpus // workers if disagg else cfg.tp
        model = resolve_model(cfg.model, tp=self.replica_tp)  # a name or a config path
        self.model = model
        self.menu = self._menu(cfg, hw)
        reserve = int(cfg.activation_reserve_gb * 1e9)
        reserve += self.spec.graph_reserve_bytes(cfg, self.menu)  # duet's, pdmux's captures
        page = cfg.page_size or PAGE_SIZE
        self.sizing = size_kv_cache(hw.hbm_bytes, model.weight_bytes, model.kv_bytes_per_token,
                                    cfg.mem_fraction, reserve, page,
                                    max_tokens=cfg.max_total_tokens)
        if cfg.kv_pool_scale != 1.0:  # config.py's what-if: the pool (and what is sized by it)
            pages = max(1, int(self.sizing.num_pages * cfg.kv_pool_scale))
            self.sizing = dataclasses.replace(self.sizing, num_pages=pages)
        self.latency = LatencyModel(hw, model, Calibration.load(cfg.calibration), cfg.interference)
        budget = self.spec.token_budget(cfg)
        ctx = PlanContext(self.latency, self.menu, cfg.tbt_slo_ms / 1e3, budget, cfg)
        costs = RunCosts.build(cfg, self.spec.flavor, hw, model.name, self.replica_tp,
                               self.sizing, budget, workload.hash_ids is not None)
        self.costs = costs
        decode_host = self.menu.decode_host if self.spec.partitions else "lookahead"
        executor = Executor(self.latency, self.spec.free_running, decode_host,
                            self.spec.split_forward_budget(cfg), costs.graph_max_bs)
        flavor = costs.flavor

        def replica(i: int, role: str = "mixed", hand_off=None) -> Replica:
            return Replica(i, self.spec.make(ctx), executor, KvCache(self.sizing.num_pages, page),
                           flavor, budget, role, hand_off,  # type: ignore[arg-type]
                           reuse_predictions, **costs.replica_kwargs(),  # type: ignore[arg-type]
                           order=queue_order(cfg, self.spec.name, self.spec.flavor, self.latency))

        self.disagg: Disagg | None = None
        if disagg:
            x = cfg.disagg_prefill
            pre = [replica(i, "prefill", functools.partial(self._hand_off, i)) for i in range(x)]
            dec = [replica(x + j, "decode") for j in range(cfg.disagg_decode)]
            self.disagg = Disagg(pre, dec, model.kv_bytes_per_token / (cfg.kv_xfer_gbps * 1e9),
                                 cfg.kv_xfer_setup_ms / 1e3, self._push_xfer)
            self.replicas = pre + dec
            self.entry = pre
        else:
            self.replicas = [replica(i) for i in range(cfg.gpus // cfg.tp)]
            self.entry = self.replicas
        self.frontend = costs.frontend(len(self.entry))
        self.router_name = self.spec.router_for(cfg)
        self.router = SimRouter(self.router_name, len(self.entry), self.latency,
                                cfg.tbt_slo_ms / 1e3, cfg.token_budget,
                                duet_admission(cfg, self.latency)
                                if self.spec.name == "duet" else None)
        self._heap: list[tuple[float, int, int, object]] = []
        self._seq = 0
        self._end_at = [INF] * len(self.replicas)
        self._next_arrival = INF
        # which arrivals a replica gets is known in advance under round-robin, and with one
        # replica under any router
        self._own = own_horizon and not disagg and (self.router_name == "round-robin"
                                                    or len(self.entry) == 1)
        self._own_times: list[list[float]] = [[] for _ in self.replicas]
        self._own_ptr = [0] * len(self.replicas)

    # --- heap -----------------------------------------------------------------------------------

    def _menu(self, cfg: SimConfig, hw) -> MenuPlan:
        """The runtime's menu on a GPU shape. A measured profile (a hardware JSON, e.g. this CPU
        in benchmark/sim_to_real) is no GPU shape with a green-context table: it gets libsmctrl's
        rule on its own SM count (whole TPCs, at least one per side, eager decode)."""
        try:
            return plan_menu(cfg.partition_backend, cfg.hardware, cfg.decode_graph_sizes,
                             min_decode=cfg.partition_min_sms, min_prefill=cfg.partition_min_sms)
        except ValueError:
            if cfg.hardware in GPU_SHAPES:
                raise
            tpc = hw.sms_per_tpc
            return menu_for("libsmctrl", hw.num_sms, tpc_granularity(tpc), 0, False, tpc, tpc)
    def _push(self, t: float, kind: int, obj: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, obj))

    def _kick(self, rep: Replica, now: float) -> None:
        if not rep.busy and not rep.start_scheduled and rep.has_work:
            rep.start_scheduled = True
            self._push(now, START, rep)

    def _horizon(self, rep: Replica) -> float:
        h = self._work_horizon(rep)
        fe = self.frontend
        return h if fe is None or rep.role == "decode" else min(h, fe.next_ready(rep.idx))

    def _work_horizon(self, rep: Replica) -> float:
        if self._own:
            times, p = self._own_times[rep.idx], self._own_ptr[rep.idx]
            return times[p] if p < len(times) else INF
        if rep.role != "decode":
            return self._next_arrival
        # new work reaches a decode worker through the prefill workers: bound by its next
        # landing, their next iteration ends and the next arrival (it may wake one)
        dis = self.disagg
        h = dis.next_landing(rep)  # type: ignore[union-attr]
        for p in dis.prefill:  # type: ignore[union-attr]
            h = min(h, self._end_at[p.idx])
        return min(h, self._next_arrival)

    def _start(self, rep: Replica, now: float) -> None:
        rep.start_scheduled = False
        end = rep.start(now, self._horizon(rep))
        if end is None:
            return
        rep.busy = True
        self._end_at[rep.idx] = end
        self._push(end, END, rep)

    # --- disaggregation -------------------------------------------------------------------------
    def _hand_off(self, prefill_idx: int, r: Request, now: float) -> None:
        self.disagg.hand_off(self.replicas[prefill_idx], r, now)  # type: ignore[union-attr]

    def _push_xfer(self, t: float, r: Request, decode_idx: int) -> None:
        self._push(t, XFER, (r, decode_idx))

    def _landed(self, r: Request, decode_idx: int, now: float) -> None:
        d = self.replicas[decode_idx]
        rep = self.disagg.landed(r, d, now)  # type: ignore[union-attr]
        self._kick(rep, now)
        self._kick(d, now)

    # --- main loop ------------------------------------------------------------------------------
    def run(self, progress: Callable[[int, int], None] | None = None) -> SimResult:
        t_wall = time.perf_counter()
        w = self.workload
        arr = w.arrival_s.tolist()
        inp = w.input_len.tolist()
        out = w.output_len.tolist()
        n = len(arr)
        requests = [Request(i, arr[i], inp[i], out[i]) for i in range(n)]
        if self.costs.prefix and w.hash_ids is not None:
            for r, h in zip(requests, w.hash_ids, strict=True):
                r.hashes = h
        cap_entry = self.sizing.num_pages
        if self._own:  # round-robin: the j-th admitted arrival goes to replica j % N
            page = self.sizing.page_size
            fits = [pages_for(inp[j] + out[j], page) <= cap_entry for j in range(n)]
            times = [arr[j] for j in range(n) if fits[j]]
            nrep = len(self.replicas)
            self._own_times = [times[k::nrep] for k in range(nrep)]
            if self.frontend is not None:  # new work reaches a scheduler when intake ends
                self._own_times = [self.frontend.ready_times(t) for t in self._own_times]
        heap = self._heap
        pop = heapq.heappop
        i = 0
        events = 0
        while True:
            ta = arr[i] if i < n else INF
            if heap and (heap[0][0] < ta or (heap[0][0] == ta and heap[0][1] < ARRIVAL)):
                t, kind, _, obj = pop(heap)
                if kind == END:
                    rep: Replica = obj  # type: ignore[assignment]
                    rep.busy = False
                    self._end_at[rep.idx] = INF
                    rep.finish(t)
                    if self.disagg is not None:
                        self.disagg.try_transfers(t)
                    self._kick(rep, t)
                elif kind == XFER:
                    self._landed(*obj, t)  # type: ignore[misc]
                elif kind == READY:  # through the front end (sim/frontend.py)
                    rep = self.replicas[obj.entry]  # type: ignore[attr-defined]
                    self.frontend.handed_over(rep.idx)  # type: ignore[union-attr]
                    rep.enqueue(obj)  # type: ignore[arg-type]
                    self._kick(rep, t)
                else:
                    self._start(obj, t)  # type: ignore[arg-type]
            elif i < n:
                r = requests[i]
                i += 1
                self._next_arrival = arr[i] if i < n else INF
                if pages_for(r.prompt_len + r.output_len, self.sizing.page_size) > cap_entry:
                    r.rejected = True
                    continue
                rep = self.router.pick(self.entry, r, ta)
                self._own_ptr[rep.idx] += 1
                if self.frontend is None:
                    rep.enqueue(r)
                    self._kick(rep, ta)
                else:
                    r.entry, r.server = rep.idx, self.frontend.next_server(rep.idx)
                    self._push(self.frontend.intake(rep.idx, ta), READY, r)
            else:
                break
            events += 1
            if progress is not None and events % 4096 == 0:
                progress(sum(len(rp.finished) for rp in self.replicas), n)
        if progress is not None:
            progress(n, n)
        stuck = [r for r in requests if not r.rejected and r.finish_s < 0.0]
        if stuck:
            raise RuntimeError(f"{len(stuck)} requests never finished (first: {stuck[0]!r})")
        dis = self.disagg
        return SimResult(self.spec.name, requests, self.replicas, self.sizing, self.replica_tp,
                         time.perf_counter() - t_wall, dis.transfers if dis else 0,
                         dis.transfer_s if dis else 0.0, frontend=self.frontend)


def simulate(cfg: SimConfig, workload: Workload, policy: str | PolicySpec | None = None,
             progress: Callable[[int, int], None] | None = None, **kw: bool) -> SimResult:
    return Simulation(cfg, workload, policy, **kw).run(progress)
