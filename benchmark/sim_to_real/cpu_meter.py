"""How much of this shared machine's CPU other jobs took during a run (Linux /proc).

others = machine busy time - the server's process group - this process and its reaped children
(the bench_serving client), over the run's wall time, in cores. `server_wait_share`: of the
time the server's threads were runnable, the share they waited for a core (schedstat run-queue
delay / (run time + delay)): 0 on a quiet machine, 0.5 when every forward took twice as long
for want of a core. Timings of a contended run are not comparable to a quiet one; the report
prints both next to every point. `wait_for_quiet` holds a run back until others leave a core.

`set_autogroup_nice`: Linux gives every session (autogroup, `sched_autogroup_enabled`) an equal
share of the cores whatever its processes' own niceness, and a server started in a session of
its own (`local_server.Server`) then competes with each other session on the machine as an
equal; a negative autogroup niceness (root) gives it its core back while it is measured.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_busy_s() -> float:
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0.0
    vals = [int(x) for x in fields[:8]]
    idle = vals[3] + vals[4]  # idle + iowait
    return (sum(vals) - idle) / _TICK


def _group(pgid: int) -> list[Path]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if int((d / "stat").read_text().rsplit(")", 1)[1].split()[2]) == pgid:
                out.append(d)
        except (OSError, IndexError, ValueError):
            continue
    return out


def group_cpu_s(pgid: int) -> float:
    """User + system seconds of the live processes of one process group."""
    total = 0
    for d in _group(pgid):
        try:
            rest = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(rest[11]) + int(rest[12])
    return total / _TICK


def group_sched_s(pgid: int) -> tuple[float, float]:
    """(run seconds, run-queue wait seconds) of every thread of one process group."""
    run = wait = 0
    for d in _group(pgid):
        for t in (d / "task").glob("*/schedstat"):
            try:
                a, b, _ = t.read_text().split()
            except (OSError, ValueError):
                continue
            run, wait = run + int(a), wait + int(b)
    return run / 1e9, wait / 1e9


def set_autogroup_nice(pid: int | str, nice: int) -> int | None:
    """Set the niceness of `pid`'s autogroup (``"self"`` for this process); returns the old
    one, or None where the kernel has no autogroups or refuses (not root)."""
    path = Path(f"/proc/{pid}/autogroup")
    try:
        old = int(path.read_text().split("nice")[1])
        path.write_text(str(nice))
    except (OSError, IndexError, ValueError):
        return None
    return old


def own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class CpuMeter:
    """`with CpuMeter(server_pgid) as m: ...`, then `m.result()`."""

    def __init__(self, pgid: int | None) -> None:
        self.pgid = pgid
        self.start: tuple[float, ...] | None = None
        self.stop: tuple[float, ...] | None = None

    def _snap(self) -> tuple[float, ...]:
        server = group_cpu_s(self.pgid) if self.pgid else 0.0
        run, wait = group_sched_s(self.pgid) if self.pgid else (0.0, 0.0)
        return time.monotonic(), machine_busy_s(), server, own_cpu_s(), run, wait

    def __enter__(self) -> CpuMeter:
        self.start = self._snap()
        return self

    def __exit__(self, *exc) -> None:
        self.stop = self._snap()

    def result(self) -> dict:
        if self.start is None or self.stop is None:
            return {}
        wall, busy, server, own, run, wait = (
            b - a for a, b in zip(self.start, self.stop, strict=True))
        if wall <= 0:
            return {}
        others = max(0.0, busy - server - own)
        return {"wall_s": round(wall, 2), "server_cores": round(server / wall, 3),
                "client_cores": round(own / wall, 3), "others_cores": round(others / wall, 3),
                "server_wait_share": round(wait / (run + wait), 3) if run + wait > 0 else None}


def wait_for_quiet(pgid: int | None, max_others: float, timeout_s: float,
                   window_s: float = 5.0) -> dict:
    """Wait until other jobs used at most `max_others` cores over a `window_s` window, or
    `timeout_s` passed; returns the seconds waited and the last window's figure."""
    t0 = time.monotonic()
    while True:
        with CpuMeter(pgid) as m:
            time.sleep(window_s)
        others = m.result().get("others_cores", 0.0)
        waited = time.monotonic() - t0
        if others <= max_others or waited >= timeout_s:
            return {"waited_s": round(waited, 1), "others_cores": others,
                    "quiet": others <= max_others}
