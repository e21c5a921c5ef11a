"""Request routers across replicas, shared by the server's `--dp-size` dispatch and the simulator.

Pure Python (the duet router uses `sglang_duet.latency`); no torch, no SGLang. A router is fed
`ReplicaLoad` reports (`observe`) and answers `pick(prompt_tokens) -> Decision`.
"""

from __future__ import annotations

from .base import REFRESH_S, Router, RouterContext
from .duet import DuetRouter
from .load import Decision, NoReplicaError, ReplicaLoad
from .registry import ROUTERS, make_router

__all__ = [
    "REFRESH_S",
    "ROUTERS",
    "Decision",
    "DuetRouter",
    "NoReplicaError",
    "ReplicaLoad",
    "Router",
    "RouterContext",
    "make_router",
]
