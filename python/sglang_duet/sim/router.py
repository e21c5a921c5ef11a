"""Routers: which replica an arriving request joins. Names are the ``--router`` choices."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .replica import Replica

__all__ = ["ROUTERS", "LeastTokensRouter", "RoundRobinRouter", "make_router"]


class Router(Protocol):
    def pick(self, replicas: Sequence[Replica]) -> Replica: ...


class RoundRobinRouter:
    def __init__(self) -> None:
        self._next = 0

    def pick(self, replicas: Sequence[Replica]) -> Replica:
        r = replicas[self._next % len(replicas)]
        self._next += 1
        return r


class LeastTokensRouter:
    """Fewest outstanding tokens (prompt still to prefill + output still to generate); ties go
    to the lowest index."""

    def pick(self, replicas: Sequence[Replica]) -> Replica:
        return min(replicas, key=lambda r: (r.outstanding, r.idx))


ROUTERS = {"round-robin": RoundRobinRouter, "least-tokens": LeastTokensRouter}


def make_router(name: str) -> Router:
    try:
        return ROUTERS[name]()
    except KeyError:
        raise ValueError(f"unknown router {name!r}; choices: {', '.join(ROUTERS)}") from None
