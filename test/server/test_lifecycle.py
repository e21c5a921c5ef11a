"""SIGTERM drain with its deadline and the end on a child's death (#16 items 1 and 3), driven
on a real event loop with real child processes, and the exit replaced by a recorder."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import psutil

from sglang_duet.server.lifecycle import EXIT_CHILD_DIED, Lifecycle
from sglang_duet.server.state import OpenRequest, ServerState


class Stream:
    """An open SSE response as the server's send sees it."""

    def __init__(self):
        self.messages = []

    async def send(self, msg):
        self.messages.append(msg)

    def events(self):
        text = b"".join(m.get("body", b"") for m in self.messages).decode()
        return [ln[6:] for ln in text.splitlines() if ln.startswith("data: ")]


def open_stream(state: ServerState) -> tuple[int, Stream]:
    s = Stream()
    key = state.register(OpenRequest("/generate", s.send, started=True, sse=True))
    return key, s


def test_drain_finishes_open_requests_then_exits_0():
    async def scenario():
        state, exits = ServerState(), []
        life = Lifecycle(state, drain_timeout_s=5.0, exit_fn=exits.append)
        life.stop_own_children = False  # not pytest's other children (shared servers)
        key, _ = open_stream(state)
        life.on_sigterm()
        assert state.unavailable and "draining" in state.unavailable
        await asyncio.sleep(0.2)
        assert exits == []  # still waiting for the open request
        t0 = time.monotonic()
        state.unregister(key)  # the request finishes on its own
        while not exits:
            await asyncio.sleep(0.01)
        return exits, time.monotonic() - t0

    exits, took = asyncio.run(scenario())
    assert exits == [0] and took < 5.0  # FLUSH_S after the last request; loose: shared CPU


def test_drain_deadline_ends_streams_with_an_error_event():
    async def scenario():
        state, exits = ServerState(), []
        life = Lifecycle(state, drain_timeout_s=0.5, exit_fn=exits.append)
        life.stop_own_children = False  # not pytest's other children (shared servers)
        _, stream = open_stream(state)
        t0 = time.monotonic()
        life.on_sigterm()
        life.on_sigterm()  # a second SIGTERM (process group + parent) changes nothing
        while not exits:
            await asyncio.sleep(0.01)
        return exits, time.monotonic() - t0, stream

    exits, took, stream = asyncio.run(scenario())
    assert exits == [0] and 0.5 <= took < 2.0
    events = stream.events()
    assert events[-1] == "[DONE]"
    err = json.loads(events[-2])["error"]
    assert err["code"] == 503 and "--duet-drain-timeout-s" in err["message"]
    assert stream.messages[-1]["more_body"] is False


def test_dead_child_is_noticed_and_ends_everything():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

    async def scenario():
        state, exits = ServerState(), []
        life = Lifecycle(state, drain_timeout_s=30.0, exit_fn=exits.append)
        life.stop_own_children = False  # not pytest's other children (shared servers)
        life.death_linger_s = 0.5  # health checkers get 503 meanwhile
        life.loop = asyncio.get_running_loop()
        life.watch([psutil.Process(child.pid), psutil.Process(other.pid)])
        _, stream = open_stream(state)
        await asyncio.sleep(0.3)
        assert state.unavailable is None
        t0 = time.monotonic()
        child.kill()
        while state.dead is None:
            await asyncio.sleep(0.01)
        noticed = time.monotonic() - t0
        while not exits:
            assert state.unavailable  # /health answers 503 until the exit
            await asyncio.sleep(0.01)
        return state, exits, noticed, time.monotonic() - t0, stream, psutil.pid_exists(other.pid)

    try:
        state, exits, noticed, ended, stream, other_alive = asyncio.run(scenario())
        assert bystander.poll() is None  # another of pytest's children (a shared test server)
    finally:
        for p in (child, other, bystander):
            p.kill()
            p.wait()
    assert noticed < 1.0 and ended < 3.0
    assert exits == [EXIT_CHILD_DIED]
    assert f"pid {child.pid}" in state.dead
    assert json.loads(stream.events()[-2])["error"]["code"] == 503
    assert not other_alive  # the other child was stopped (and reaped)
