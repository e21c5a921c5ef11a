"""Real servers shared by the whole test session, one per configuration (the conftest fixtures).

A start costs ~13 s on an idle 2-core machine (~20 s for stock SGLang), most of it imports, so a
configuration that several test modules use starts once. A server starts when the first test that
needs it is set up (the other shared servers that test needs start at the same moment), or earlier
in the background: while the tests before its first user run, the next configuration to be needed
starts on the core those tests leave idle (`prestart`; one such server at a time, so memory
holds). Each one stops right after the last collected test that needs it, so only the servers of
neighbouring tests are up at a time. A test that needs a fresh server (one that kills a child,
drains, or needs other flags) starts its own `Server`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from sglang_duet.local_server import Server

START_TIMEOUT_S = 400.0  # parallel starts on a loaded shared machine take minutes


@dataclass
class SharedServers:
    """`configs`: fixture name -> a function making its (unstarted) Server."""

    configs: dict[str, Callable[[], Server]]
    last_use: dict[str, str] = field(default_factory=dict)  # name -> nodeid of its last user
    current: Iterable[str] = ()  # fixture names of the test being set up
    first_use: dict[str, int] = field(default_factory=dict)  # name -> index of its first user
    order: dict[str, int] = field(default_factory=dict)  # nodeid -> index among collected items
    _starting: dict[str, Future] = field(default_factory=dict)
    _pool: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(4, thread_name_prefix="server-start"))

    def plan_uses(self, items: Iterable) -> None:
        """Records each configuration's last user among the collected (and selected) items."""
        for i, item in enumerate(items):
            self.order[item.nodeid] = i
            for name in self.configs.keys() & set(getattr(item, "fixturenames", ())):
                self.last_use[name] = item.nodeid
                self.first_use.setdefault(name, i)

    def prestart(self, nodeid: str) -> str | None:
        """Before test `nodeid` runs: starts, in the background, the configuration whose first
        user comes next after it, unless a server no test has used yet is up or starting.
        Returns the name it started, if any."""
        now = self.order.get(nodeid)
        if now is None:
            return None
        ahead = sorted((i, n) for n, i in self.first_use.items() if i > now)
        if any(n in self._starting for _, n in ahead):
            return None  # one unused server at a time
        if not ahead:
            return None
        name = ahead[0][1]
        self._starting[name] = self._pool.submit(self._start, name)
        return name

    def get(self, name: str) -> Server:
        """The started server `name`; starts it, and the current test's other shared servers
        with it, when it is not started yet."""
        for other in sorted(self.configs.keys() & {name, *self.current}):
            if other not in self._starting:
                self._starting[other] = self._pool.submit(self._start, other)
        return self._starting[name].result()

    def _start(self, name: str) -> Server:
        return self.configs[name]().start(timeout=START_TIMEOUT_S)

    def done_with(self, nodeid: str) -> None:
        """Stops the servers whose last user was `nodeid`."""
        for name, last in self.last_use.items():
            if last == nodeid:
                self._stop(name)

    def stop_all(self) -> None:
        for name in list(self._starting):
            self._stop(name)
        self._pool.shutdown(wait=True)

    def _stop(self, name: str) -> None:
        """Stops `name`; a later `get` (a fixture asked for it dynamically) starts a new one."""
        fut = self._starting.pop(name, None)
        if fut is None:
            return
        try:
            srv = fut.result()
        except Exception:  # noqa: BLE001 - its start failed: that test reported it already
            return
        srv.stop()
        for path in getattr(srv, "temp_dirs", ()):
            shutil.rmtree(path, ignore_errors=True)


def with_temp_dir(make: Callable[[str], Server]) -> Callable[[], Server]:
    """A config whose server writes into a fresh directory (removed when it stops)."""

    def config() -> Server:
        path = tempfile.mkdtemp(prefix="duet_test_")
        srv = make(path)
        srv.temp_dirs = [path]
        return srv

    return config
