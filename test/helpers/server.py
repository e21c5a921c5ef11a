"""Start a real SGLang / sglang-duet server on this machine for a test session, and stop it.

The logic lives in benchmark/serving/launch.py (the benchmarks use it too); this module keeps the
names the tests import.
"""

from __future__ import annotations

from benchmark.serving.launch import ROOT, STOCK_CPU_FLAGS, Server, child_env, free_port

__all__ = ["ROOT", "STOCK_CPU_FLAGS", "Server", "child_env", "free_port"]
