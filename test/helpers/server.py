"""Start a real SGLang / sglang-duet server on this machine for a test session, and stop it.

The logic lives in the package (sglang_duet.local_server; the benchmarks use it too); this module
keeps the names the tests import.
"""

from __future__ import annotations

from sglang_duet.local_server import (
    ROOT,
    STOCK_CPU_FLAGS,
    Server,
    child_env,
    cuda_available,
    free_port,
    guard_group,
    release_guard,
)

__all__ = ["ROOT", "STOCK_CPU_FLAGS", "Server", "child_env", "cuda_available", "free_port",
           "guard_group", "release_guard"]
