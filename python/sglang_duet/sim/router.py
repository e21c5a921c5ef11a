"""The simulator's seam to `sglang_duet.router`: the same router objects as the server's
`--dp-size` dispatch, fed with load reports built from the simulated replicas' queues (the fields
SGLang's schedulers publish, see `sglang_duet.router.load`). Names are the ``--router`` choices."""

from __future__ import annotations

from collections.abc import Sequence

from sglang_duet.policy.admission import Admission
from sglang_duet.router import ROUTERS, ReplicaLoad, RouterContext, make_router

from .replica import Replica
from .request import Request

__all__ = ["ROUTERS", "SimRouter", "replica_load"]


def replica_load(rep: Replica, slot: int, now: float) -> ReplicaLoad:
    """What SGLang's `SchedulerLoadInquirer.get_loads` would report for this replica at `now`."""
    running = rep.running
    prefilling = rep.prefilling
    queue = rep.queue
    used = sum(r.kv_tokens for r in running) + sum(r.kv_tokens for r in prefilling)
    queued = sum(r.base - r.computed for r in queue) + sum(r.base - r.computed for r in prefilling)
    return ReplicaLoad(
        replica=slot,
        running=len(running) + len(rep.joiners),
        waiting=len(queue),
        context_tokens=used,
        queued_tokens=queued,
        total_tokens=used + sum(r.base for r in queue),
        capacity_tokens=rep.kv.num_pages * rep.page,
        timestamp=now,
    )


class SimRouter:
    """Routes arrivals among `replicas` (by position) with a registry router."""

    def __init__(self, name: str, num_replicas: int, latency: object, tbt_slo_s: float,
                 token_budget: int, admission: Admission | None = None) -> None:
        """``admission``: the replicas' admission order, which the duet router's first-token
        prediction follows (`RouterContext.admission`)."""
        self.router = make_router(name, num_replicas,
                                  RouterContext(latency, tbt_slo_s, token_budget,
                                                admission=admission))

    def pick(self, replicas: Sequence[Replica], r: Request, now: float) -> Replica:
        router = self.router
        if router.due(now):
            router.observe([replica_load(rep, i, now) for i, rep in enumerate(replicas)], now)
        return replicas[router.pick(r.base - r.computed).replica]
