"""The order in which a simulated replica admits its waiting requests.

`queue_order` builds one replica's order (`Replica.order`, called before every admission with
the queue, the time and the replica; it returns the queue reordered):

* duet: `sglang_duet.policy.admission.Admission`, the runtime's own order (``--duet-admission``:
  ``SimConfig.duet_admission``), over each request's arrival, prompt and prefix-cache hit as
  the replica's cache would give it now (`PrefixCache.peek`), predicted by the replica's
  latency model;
* SGLang-based systems: ``SimConfig.schedule_policy``, SGLang's ``--schedule-policy``
  (`SGLANG_ORDERS`; ``fcfs``, its default, keeps arrival order and needs no hook; ``lpm``,
  ``dfs-weight``, ``lof`` as SGLang 0.5.17 computes them and ``hrrn``, added after 0.5.17:
  `sim.sglang_orders`);
* the others (vLLM, Dynamo, the paper's scheme): arrival order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from sglang_duet.latency import LatencyModel
from sglang_duet.policy.admission import (
    Admission,
    AdmissionConfig,
    Candidate,
    model_prefill_seconds,
)

from .config import SimConfig
from .request import Request
from .sglang_orders import ORDERS, QueueOrder

if TYPE_CHECKING:
    from .replica import Replica

__all__ = ["SGLANG_ORDERS", "QueueOrder", "duet_admission", "duet_order", "queue_order"]


# SGLang's --schedule-policy values the simulator follows, name -> factory(cfg) -> QueueOrder
SGLANG_ORDERS: dict[str, Callable[[SimConfig], QueueOrder | None]] = {
    "fcfs": lambda cfg: None,
    **ORDERS,
}


def duet_admission(cfg: SimConfig, latency: LatencyModel) -> Admission | None:
    """A new `Admission` of duet's order for ``cfg`` (None: arrival order): one per replica and
    one for the router, each with its own memo."""
    if cfg.duet_admission == "fcfs":
        return None
    return Admission(AdmissionConfig(cfg.duet_admission, cfg.ttft_slo_ms / 1e3,
                                     cfg.duet_ttft_per_token_ms / 1e3, cfg.duet_aging),
                     _fitted(latency))


def duet_order(cfg: SimConfig, latency: LatencyModel) -> QueueOrder | None:
    """Duet's admission order for ``cfg`` (None: arrival order)."""
    adm = duet_admission(cfg, latency)
    if adm is None:
        return None

    def order(queue: Iterable[Request], now: float, rep: Replica) -> list[Request]:
        if not rep.may_admit():  # nothing is taken: the queue's order is read by no one, and
            return list(queue)  # the next answer does not depend on it (`Admission.order`)
        reqs = list(queue)
        cache = rep.prefix
        cands = [Candidate(r.arrival_s, r.base, cache.peek(r.hashes, r.base)
                           if cache is not None and r.hashes else r.computed) for r in reqs]
        return [reqs[i] for i in adm.order(cands, now)]

    return order


_FITS: dict[int, Callable[[int, int], float]] = {}


def _fitted(latency: LatencyModel) -> Callable[[int, int], float]:
    """`fit_prefill_seconds` of ``latency``'s whole-device prefill, once per model object."""
    key = id(latency)
    if key not in _FITS:
        _FITS[key] = model_prefill_seconds(latency)
    return _FITS[key]


def queue_order(cfg: SimConfig, policy: str, flavor: str, latency: LatencyModel
                ) -> QueueOrder | None:
    """The admission order of one replica of ``policy`` (module docstring)."""
    if policy == "duet":
        return duet_order(cfg, latency)
    if flavor == "sglang" and policy != "duet-paper":
        return SGLANG_ORDERS[cfg.schedule_policy](cfg)
    return None
