"""Router series on SGLang's /metrics (Prometheus multiprocess mode, written from the
data-parallel controller process): `sglang_duet:router_dispatches_total{replica}` and
`sglang_duet:router_predicted_load_seconds{replica}` (the duet router's predicted seconds until
a new full-chunk request's first token; absent for routers without a latency model)."""

from __future__ import annotations

__all__ = ["RouterMetrics"]


class RouterMetrics:
    def __init__(self, enabled: bool, replicas: int) -> None:
        self.counts = [0] * replicas
        self._counter = self._gauge = None
        if enabled:
            from prometheus_client import Counter, Gauge

            self._counter = Counter("sglang_duet:router_dispatches",
                                    "Requests dispatched per replica", ["replica"])
            self._gauge = Gauge("sglang_duet:router_predicted_load_seconds",
                                "Predicted seconds until a new full-chunk request's first token",
                                ["replica"], multiprocess_mode="mostrecent")

    def dispatched(self, replica: int) -> None:
        self.counts[replica] += 1
        if self._counter is not None:
            self._counter.labels(replica=str(replica)).inc()

    def loads(self, loads_s: list[float | None]) -> None:
        if self._gauge is None:
            return
        for i, value in enumerate(loads_s):
            if value is not None:
                self._gauge.labels(replica=str(i)).set(value)
