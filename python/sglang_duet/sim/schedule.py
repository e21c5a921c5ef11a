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

from sglang_duet.latency import Batch, LatencyModel
from sglang_duet.policy.admission import Admission, AdmissionConfig, Candidate, fit_prefill_seconds

from .config import SimConfig
from .request import Request
from .sglang_orders import ORDERS

if TYPE_CHECKING:
    from .replica import Replica

__all__ = ["SGLANG_ORDERS", "QueueOrder", "duet_order", "queue_order"]

QueueOrder = Callable[[Iterable[Request], float, "Replica"], list[Request]]

# SGLang's --schedule-policy values the simulator follows, name -> factory(cfg) -> QueueOrder
SGLANG_ORDERS: dict[str, Callable[[SimConfig], QueueOrder | None]] = {
    "fcfs": lambda cfg: None,
    **ORDERS,
}


def duet_order(cfg: SimConfig, latency: LatencyModel) -> QueueOrder | None:
    """Duet's admission order for ``cfg`` (None: arrival order)."""
    if cfg.duet_admission == "fcfs":
        return None
    adm = Admission(AdmissionConfig(cfg.duet_admission, cfg.ttft_slo_ms / 1e3,
                                    cfg.duet_ttft_per_token_ms / 1e3, cfg.duet_aging),
                    _fitted(latency))

    def order(queue: Iterable[Request], now: float, rep: Replica) -> list[Request]:
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
        _FITS[key] = fit_prefill_seconds(
            lambda q, c: latency.predict(Batch([q], [c])).total_s)
    return _FITS[key]


def queue_order(cfg: SimConfig, policy: str, flavor: str, latency: LatencyModel
                ) -> QueueOrder | None:
    """The admission order of one replica of ``policy`` (module docstring)."""
    if policy == "duet":
        return duet_order(cfg, latency)
    if flavor == "sglang" and policy != "duet-paper":
        return SGLANG_ORDERS[cfg.schedule_policy](cfg)
    return None
