"""SIGTERM drains with a deadline; a dead child ends the server within seconds, cleanly.

Stock SGLang 0.5.17 (what this replaces, in our launcher only):
- SIGTERM sets `TokenizerManager.gracefully_exit` and waits, in 5 s steps and with no deadline,
  until no request is open, while still admitting new ones; children that got the same SIGTERM
  (a SIGTERM to the process group) die at once, and that is logged as a crash.
- A dead child is seen by its `SubprocessWatchdog`, whose SIGQUIT handler first sleeps 5 s and
  waits 60 s for CUDA coredumps (also without CUDA), then SIGKILLs everything: open streams are
  cut and /health hangs meanwhile.

Here: the children ignore SIGTERM and SIGINT (the parent owns the shutdown); the parent's
SIGTERM, or SIGINT (a Ctrl-C reaches the whole process group), starts a drain (new requests with
a body and /health get 503 at once; open requests get `--duet-drain-timeout-s` to finish, then
end with an error event; then every child is stopped and the server exits 0; a second Ctrl-C
ends the drain at once). A child's death (seen by our poll every 0.25 s, or SGLang's SIGQUIT)
turns /health into 503, ends open streams with an SSE error event, stops the other children and
exits with status 3 within a second.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Callable

from sglang_duet.server.state import ServerState

logger = logging.getLogger("sglang_duet.server")

EXIT_CHILD_DIED = 3
POLL_S = 0.25  # child liveness poll period (seconds)
FLUSH_S = 0.3  # time given to the error events to leave before the process exits (seconds)
# After a child's death the server keeps answering (503) this long before it exits, so that
# health checkers see a 503 rather than only a refused connection (seconds).
DEATH_LINGER_S = 2.0


def run_child(target: Callable, *args, **kwargs):
    """Entry of every SGLang child we start: ignore SIGTERM and SIGINT, so that a SIGTERM or a
    Ctrl-C to the whole process group leaves the shutdown to the parent's drain. (Children still
    die with the parent: SGLang sets PR_SET_PDEATHSIG=SIGKILL in each.)"""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return target(*args, **kwargs)


class ChildEntry:
    """`run_child(target, ...)` as a picklable target that carries the launcher's environment
    as it is when the child starts (`Process.start` pickles the target then): a child forked
    from the fork server (`server/forkserver.py`) would otherwise see the environment of the
    moment that server started, before the launcher's own settings."""

    def __init__(self, target: Callable) -> None:
        self.target = target
        self.env: dict[str, str] | None = None

    def __getstate__(self) -> dict:
        return {"target": self.target, "env": dict(os.environ)}

    def __setstate__(self, state: dict) -> None:
        self.target, self.env = state["target"], state["env"]

    def __call__(self, *args, **kwargs):
        if self.env is not None:  # key by key: os.environ.clear() breaks SGLang's setproctitle
            for key in [k for k in os.environ if k not in self.env]:
                del os.environ[key]
            for key, value in self.env.items():
                if os.environ.get(key) != value:
                    os.environ[key] = value
        return run_child(self.target, *args, **kwargs)


def child_label(proc) -> str:
    try:
        title = proc.cmdline()[0] if proc.cmdline() else proc.name()
    except Exception:
        title = "?"
    return f"{title.split()[0] if title else '?'} (pid {proc.pid})"


class Lifecycle:
    def __init__(self, state: ServerState, drain_timeout_s: float,
                 exit_fn: Callable[[int], None] = os._exit):
        self.state = state
        self.drain_timeout_s = drain_timeout_s
        self.exit_fn = exit_fn
        self.loop: asyncio.AbstractEventLoop | None = None
        self.children: list = []  # psutil.Process of the children watched
        self.labels: dict[int, str] = {}  # pid -> "title (pid N)", read while they live
        self.stop_watching: list[Callable[[], None]] = []  # SGLang's watchdog stop, ours
        self._ending = False
        self._deadline = 0.0  # monotonic seconds the drain waits until
        self.death_linger_s = DEATH_LINGER_S
        # the server process ends every process it started; a test driving a Lifecycle inside
        # pytest sets this False so that the session's other servers are left alone
        self.stop_own_children = True

    # ---- installation ------------------------------------------------------------------

    def attach(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Take SIGTERM, SIGINT and SIGQUIT on the server's event loop (call on that loop)."""
        self.loop = loop or asyncio.get_running_loop()
        self.loop.add_signal_handler(signal.SIGTERM, self.on_sigterm)
        self.loop.add_signal_handler(signal.SIGINT, self.on_sigint)
        self.loop.add_signal_handler(signal.SIGQUIT, self.on_sigquit)

    def handler_class(self) -> type:
        """A stand-in for SGLang's `SignalHandler` (TokenizerManager.signal_handler_class), so
        that the handlers SGLang installs on its first request are ours too."""
        life = self

        class DuetSignalHandler:
            def __init__(self, tokenizer_manager) -> None:
                self.tokenizer_manager = tokenizer_manager

            def sigterm_handler(self, signum=None, frame=None) -> None:
                life.on_sigterm()

            def running_phase_sigquit_handler(self, signum=None, frame=None) -> None:
                life.on_sigquit()

        return DuetSignalHandler

    def watch(self, children: list) -> None:
        """Poll `children` (psutil.Process) in a daemon thread; any death ends the server."""
        self.children = list(children)
        self.labels = {c.pid: child_label(c) for c in self.children}
        stop = threading.Event()
        self.stop_watching.append(stop.set)
        threading.Thread(target=self._poll, args=(stop,), daemon=True,
                         name="duet-child-watch").start()
        logger.info("watching children: %s", ", ".join(self.labels.values()))

    def _poll(self, stop: threading.Event) -> None:
        import psutil

        while not stop.wait(POLL_S):
            for c in self.children:
                try:
                    alive = c.is_running() and c.status() != psutil.STATUS_ZOMBIE
                except psutil.Error:
                    alive = False
                if not alive:
                    self._from_thread(f"child {self.labels[c.pid]} died")
                    return

    def _from_thread(self, reason: str) -> None:
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.on_child_death, reason)

    # ---- events ------------------------------------------------------------------------

    def on_sigterm(self, name: str = "SIGTERM") -> None:
        if self.state.draining or self._ending:
            logger.info("%s again: already draining", name)
            return
        self.state.draining = True
        self._deadline = time.monotonic() + self.drain_timeout_s
        logger.warning("%s: draining %d open request(s), deadline %.1f s; new requests get 503",
                       name, len(self.state.open), self.drain_timeout_s)
        asyncio.ensure_future(self.drain())

    def on_sigint(self) -> None:
        """Ctrl-C drains like SIGTERM; a second one ends the drain now (open requests get their
        error event), as an impatient operator expects."""
        if self.state.draining and not self._ending:
            logger.warning("SIGINT again: ending the drain now")
            self._deadline = 0.0
            return
        self.on_sigterm("SIGINT")

    def on_sigquit(self) -> None:
        dead = [self.labels[c.pid] for c in self.children if not _alive(c)]
        self.on_child_death(f"child {', '.join(dead)} died" if dead else
                            "a child process reported a failure (SIGQUIT)")

    def on_child_death(self, reason: str) -> None:
        if self._ending:
            return
        self._ending = True
        self.state.dead = reason
        logger.error("%s: /health now 503, ending %d open request(s) with an error, exiting",
                     reason, len(self.state.open))
        asyncio.ensure_future(self._end(EXIT_CHILD_DIED, reason, linger_s=self.death_linger_s))

    async def drain(self) -> None:
        if not self._deadline:
            self._deadline = time.monotonic() + self.drain_timeout_s
        while self.state.open and time.monotonic() < self._deadline and not self._ending:
            await asyncio.sleep(0.05)
        if self._ending:
            return
        self._ending = True
        left = len(self.state.open)
        if left:
            logger.warning("drain deadline %.1f s passed: ending %d request(s) with an error",
                           self.drain_timeout_s, left)
        else:
            logger.info("drained: no request open")
        await self._end(0, f"server shut down: drain deadline {self.drain_timeout_s:g} s "
                           "(--duet-drain-timeout-s) passed")

    async def _end(self, status: int, reason: str, linger_s: float = 0.0) -> None:
        for stop in self.stop_watching:
            stop()
        ended = await self.state.fail_open(reason)
        if ended:
            await asyncio.sleep(FLUSH_S)
        stop_children(self.children, own=self.stop_own_children)
        if linger_s > 0:
            await asyncio.sleep(linger_s)
        logger.info("exiting with status %d", status)
        logging.shutdown()
        self.exit_fn(status)


def _alive(proc) -> bool:
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def stop_children(children: list, timeout_s: float = 5.0, own: bool = True) -> None:
    """SIGKILL every child process (and theirs) and wait until they are gone (bounded); with
    ``own`` also every other process this one started."""
    import psutil

    procs = []
    for c in children:
        try:
            procs += [*c.children(recursive=True), c]
        except psutil.Error:
            continue
    if own:
        me = psutil.Process()
        procs += [p for p in me.children(recursive=True) if p not in procs]
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    try:
        psutil.wait_procs(procs, timeout=timeout_s)
    except (psutil.Error, OSError) as e:  # pidfd on a just-killed non-child: nothing to wait
        logger.debug("waiting for children: %s", e)
