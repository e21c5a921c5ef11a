"""Trace-driven event-heap simulator: replays real traces through the same
``sglang_duet.policy`` planners as the server, timed by ``sglang_duet.latency`` (numpy only)."""

from __future__ import annotations

from .arrivals import Workload, build_arrivals, fixed_workload
from .config import SimConfig
from .engine import SimResult, Simulation, simulate
from .metrics import RESULT_KEYS, summarize
from .policies import POLICIES, get_policy, policy_names
from .traces import TRACES, Trace, TraceError, load_trace

__all__ = [
    "POLICIES",
    "RESULT_KEYS",
    "TRACES",
    "SimConfig",
    "SimResult",
    "Simulation",
    "Trace",
    "TraceError",
    "Workload",
    "build_arrivals",
    "fixed_workload",
    "get_policy",
    "load_trace",
    "policy_names",
    "simulate",
    "summarize",
]
