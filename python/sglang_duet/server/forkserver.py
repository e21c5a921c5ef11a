"""CPU start-up: SGLang's children forked from a preloaded fork server instead of spawned.

SGLang spawns every child (`mp.set_start_method("spawn")` in `engine._set_envs_and_config`), so
the scheduler and the detokenizer each import torch and SGLang again after the launcher has
imported its own: on a 2-core machine about 8 s of a 20 s start, and one import's CPU per child.
Without a CUDA device the launcher starts Python's fork server first thing, with the children's
modules preloaded (`PRELOAD`): that import runs on the other core while the launcher imports its
own, and each child is then forked from it, already imported. Measured on the embedded tiny model
(2-core CPU, idle): see `docs/architecture.md` ("Start-up").

What a forked child would not have, it gets:
- the launcher's environment when the child starts (the fork server's is that of its own start):
  `lifecycle.ChildEntry` carries it with the target;
- death with the launcher: the first preload (`die_with_parent`) ties the fork server to it, and
  SGLang ties each child to the fork server (PR_SET_PDEATHSIG in both).

Not used with a CUDA device (SGLang's spawn, unchanged), nor with `--dp-size > 1`: SGLang's
data-parallel controller starts the schedulers from its own process, where no preloaded server
exists. Set SGLANG_DUET_SPAWN_CHILDREN=1 to keep spawn everywhere.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os

# Imported by the fork server in this order; a module that fails to import is skipped there and
# imported by the child instead (the fork server's own rule).
PRELOAD = (
    "sglang_duet.server.die_with_parent",
    "sglang.srt.managers.scheduler",
    "sglang.srt.managers.detokenizer_manager",
    "sglang_duet.runtime.scheduler",
)
OPT_OUT = "SGLANG_DUET_SPAWN_CHILDREN"
PARENT_ENV = "SGLANG_DUET_FORKSERVER_PARENT"  # the launcher's pid, read by die_with_parent
_DP_FLAGS = ("--dp-size", "--data-parallel-size")


def wanted(argv: list[str], has_gpu: bool) -> bool:
    """Whether to start the fork server for this command line: no CUDA device, no opt-out, and
    no data parallelism asked for (a glance at argv; `use_for_children` has the parsed value)."""
    if has_gpu or os.environ.get(OPT_OUT, "") not in ("", "0"):
        return False
    for i, a in enumerate(argv):
        name, _, value = a.partition("=")
        if name in _DP_FLAGS:
            value = value or (argv[i + 1] if i + 1 < len(argv) else "1")
            if value.strip() != "1":
                return False
    return True


def start() -> None:
    """Start the fork server now; it imports `PRELOAD` in the background."""
    multiprocessing.set_forkserver_preload(list(PRELOAD))
    os.environ[PARENT_ENV] = str(os.getpid())
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        os.environ.pop(PARENT_ENV, None)


def usable(server_args) -> bool:
    """Whether the children of these (parsed) server args may be forked from it."""
    return int(getattr(server_args, "dp_size", 1) or 1) == 1
