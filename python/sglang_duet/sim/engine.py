"""The event-heap loop: arrivals, iteration ends, KV transfers, deferred iteration starts.

Events at the same time are handled in this order (the ``kind`` field of a heap entry):
``END`` (an iteration finishes; frees KV) < ``XFER`` (a 1P1D KV transfer lands) < arrivals <
``START`` (an idle replica begins its next iteration). So a replica that frees up at time t
starts its next iteration only after every arrival at t is queued. Arrivals are not heap entries:
they are a sorted array merged into the loop. Ties within a kind go by insertion order.

Topologies: ``aggregated`` puts ``gpus / tp`` identical replicas behind the router; ``1p1d``
runs one prefill and one decode worker (each ``gpus / 2`` GPUs, TP = gpus / 2): a finished
prefill waits until the decode worker has pages for it, then its KV crosses the link (FIFO,
``setup + tokens x kv_bytes_per_token / throughput``); the first token reaches the user when the
transfer lands, and the request decodes from the decode worker's next iteration on. The prefill
worker holds the request's pages until it lands.

The transfer costs are the measured ones of vLLM's NixlConnector (Dynamo's vLLM backend pulls
KV with it), not NVLink's peak: ``--kv-xfer-gbps`` 4.3 GB/s aggregate and ``--kv-xfer-setup-ms``
6.7 ms post time per transfer (vllm-project/vllm#50913, 3P1D, 167 MB per transfer, 38.7 ms
average). A same-host 1P1D report measured worse, 1.8 GB/s and 129 ms post time, without NVLink
(vllm-project/vllm#34054). At the paper's Observation 3 load (8000-token prompts, 1.18 GB of
Qwen3-8B KV each) the link then moves about 3.6 requests/s, below the prefill worker's rate:
with NVLink's 450 GB/s the simulator had disaggregation at 0.83x aggregation's throughput where
the paper measured < 0.5x.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from sglang_duet.latency import Calibration, LatencyModel, get_hardware
from sglang_duet.latency.model import resolve_model
from sglang_duet.policy import SmMenu

from .arrivals import Workload
from .config import SimConfig
from .executor import Executor
from .kvcache import PAGE_SIZE, KvCache, KvSizing, pages_for, size_kv_cache
from .policies import PlanContext, PolicySpec, get_policy
from .replica import Flavor, Replica
from .request import Request
from .router import SimRouter

__all__ = ["SimResult", "Simulation", "simulate"]

END, XFER, ARRIVAL, START = 0, 1, 2, 3
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


class Simulation:
    """One policy over one workload. ``run()`` replays every request to completion."""

    def __init__(self, cfg: SimConfig, workload: Workload, policy: str | None = None,
                 reuse_predictions: bool = True, own_horizon: bool = True) -> None:
        """``reuse_predictions`` and ``own_horizon`` are speed-ups that leave results unchanged
        (tests compare both settings): reuse the planner's predictions when they are the
        executor's, and let a replica's decode stretch run to the next arrival *it* will get
        (known in advance under round-robin) rather than the next arrival anywhere."""
        cfg.validate()
        self.cfg = cfg
        self.workload = workload
        self.spec: PolicySpec = get_policy(policy or cfg.policy)
        hw = get_hardware(cfg.hardware)
        disagg = self.spec.topology == "1p1d"
        if disagg and (cfg.gpus < 2 or cfg.gpus % 2):
            raise ValueError(f"{self.spec.name} needs an even number of GPUs (>= 2)")
        self.replica_tp = cfg.gpus // 2 if disagg else cfg.tp
        model = resolve_model(cfg.model, tp=self.replica_tp)  # a name or a config path
        self.model = model
        page = cfg.page_size or PAGE_SIZE
        self.sizing = size_kv_cache(hw.hbm_bytes, model.weight_bytes, model.kv_bytes_per_token,
                                    cfg.mem_fraction, int(cfg.activation_reserve_gb * 1e9),
                                    page, max_tokens=cfg.max_total_tokens)
        self.latency = LatencyModel(hw, model, Calibration.load(cfg.calibration))
        budget = self.spec.token_budget or cfg.token_budget
        ctx = PlanContext(self.latency, SmMenu.tpc_masks(hw.num_sms, hw.sms_per_tpc),
                          cfg.tbt_slo_ms / 1e3, budget, cfg.max_lookahead, cfg.duet_mode)
        executor = Executor(self.latency, self.spec.free_running)
        flavor = Flavor.of(self.spec.flavor)

        def replica(i: int, role: str = "mixed", hand_off=None) -> Replica:
            return Replica(i, self.spec.make(ctx), executor, KvCache(self.sizing.num_pages, page),
                           flavor, budget, role, hand_off,  # type: ignore[arg-type]
                           reuse_predictions)

        if disagg:
            self.prefill_rep = replica(0, "prefill", self._hand_off)
            self.decode_rep = replica(1, "decode")
            self.replicas = [self.prefill_rep, self.decode_rep]
            self.entry = [self.prefill_rep]
        else:
            self.replicas = [replica(i) for i in range(cfg.gpus // cfg.tp)]
            self.entry = self.replicas
        self.disagg = disagg
        self.router = SimRouter(cfg.router, len(self.entry), self.latency, cfg.tbt_slo_ms / 1e3,
                                cfg.token_budget)
        self._heap: list[tuple[float, int, int, object]] = []
        self._seq = 0
        self._end_at = [INF] * len(self.replicas)
        self._next_arrival = INF
        self._own = own_horizon and not disagg and cfg.router == "round-robin"
        self._own_times: list[list[float]] = [[] for _ in self.replicas]
        self._own_ptr = [0] * len(self.replicas)
        # 1P1D state
        self._inbox: deque[Request] = deque()
        self._p_pages: dict[str, int] = {}
        self._inflight: deque[float] = deque()
        self._link_free = 0.0
        self._xfer_s_per_token = model.kv_bytes_per_token / (cfg.kv_xfer_gbps * 1e9)
        self._xfer_setup_s = cfg.kv_xfer_setup_ms / 1e3
        self.transfers = 0
        self.transfer_s = 0.0

    # --- heap -----------------------------------------------------------------------------------
    def _push(self, t: float, kind: int, obj: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, obj))

    def _kick(self, rep: Replica, now: float) -> None:
        if not rep.busy and not rep.start_scheduled and rep.has_work:
            rep.start_scheduled = True
            self._push(now, START, rep)

    def _horizon(self, rep: Replica) -> float:
        if self._own:
            times, p = self._own_times[rep.idx], self._own_ptr[rep.idx]
            return times[p] if p < len(times) else INF
        if rep.role != "decode":
            return self._next_arrival
        # new work reaches the decode worker through the prefill worker: bound by its next
        # iteration end, the next arrival (it may wake the prefill worker) and transfers
        h = self._inflight[0] if self._inflight else INF
        return min(h, self._end_at[self.prefill_rep.idx], self._next_arrival)

    def _start(self, rep: Replica, now: float) -> None:
        rep.start_scheduled = False
        end = rep.start(now, self._horizon(rep))
        if end is None:
            return
        rep.busy = True
        self._end_at[rep.idx] = end
        self._push(end, END, rep)

    # --- 1P1D -----------------------------------------------------------------------------------
    def _hand_off(self, r: Request, now: float) -> None:
        self._p_pages[r.rid] = r.pages
        r.pages = 0
        self._inbox.append(r)
        self._try_transfers(now)

    def _try_transfers(self, now: float) -> None:
        d = self.decode_rep
        while self._inbox:
            r = self._inbox[0]
            pages = pages_for(r.base, d.page)
            # leave one page per decode for its next step (SGLang/vLLM would retract otherwise)
            if pages + len(d.running) + len(d.joiners) > d.kv.free:
                break
            self._inbox.popleft()
            d.kv.alloc(pages)
            r.pages = pages
            dur = self._xfer_setup_s + r.base * self._xfer_s_per_token
            self._link_free = max(now, self._link_free) + dur
            self._inflight.append(self._link_free)
            self.transfers += 1
            self.transfer_s += dur
            self._push(self._link_free, XFER, r)

    def _landed(self, r: Request, now: float) -> None:
        self._inflight.popleft()
        self.prefill_rep.release_transferred(self._p_pages.pop(r.rid))
        self._kick(self.prefill_rep, now)
        d = self.decode_rep
        r.first_token_s = now
        if r.remaining_out <= 0:
            r.open_run(d.idx, now, 0)
            r.close_run(0)
            r.finish_s = now
            d.kv.release(r.pages)
            r.pages = 0
            d.finished.append(r)
            return
        r.open_run(d.idx, now, -1)
        d.join_decoding(r)
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
        cap_entry = self.sizing.num_pages
        if self._own:  # round-robin: the j-th admitted arrival goes to replica j % N
            page = self.sizing.page_size
            fits = [pages_for(inp[j] + out[j], page) <= cap_entry for j in range(n)]
            times = [arr[j] for j in range(n) if fits[j]]
            nrep = len(self.replicas)
            self._own_times = [times[k::nrep] for k in range(nrep)]
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
                    if self.disagg:
                        self._try_transfers(t)
                    self._kick(rep, t)
                elif kind == XFER:
                    self._landed(obj, t)  # type: ignore[arg-type]
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
                rep.enqueue(r)
                self._kick(rep, ta)
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
        return SimResult(self.spec.name, requests, self.replicas, self.sizing, self.replica_tp,
                         time.perf_counter() - t_wall, self.transfers, self.transfer_s)


def simulate(cfg: SimConfig, workload: Workload, policy: str | None = None,
             progress: Callable[[int, int], None] | None = None, **kw: bool) -> SimResult:
    return Simulation(cfg, workload, policy, **kw).run(progress)
