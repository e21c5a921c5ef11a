"""ROUTERS: name -> router class; the names are the `--router` (simulator) and `--duet-router`
(server) choices."""

from __future__ import annotations

from .base import Router, RouterContext
from .duet import DuetRouter
from .rules import (
    LeastTokensRouter,
    RoundRobinRouter,
    TotalRequestsRouter,
    TotalTokensRouter,
    VllmDpRouter,
)

__all__ = ["ROUTERS", "make_router"]

ROUTERS: dict[str, type[Router]] = {
    cls.name: cls
    for cls in (DuetRouter, RoundRobinRouter, LeastTokensRouter, TotalRequestsRouter,
                TotalTokensRouter, VllmDpRouter)
}


def make_router(name: str, num_replicas: int, ctx: RouterContext | None = None) -> Router:
    try:
        cls = ROUTERS[name]
    except KeyError:
        raise ValueError(f"unknown router {name!r}; choices: {', '.join(ROUTERS)}") from None
    return cls(num_replicas, ctx)
