"""Ctrl-C drains like SIGTERM (#24 item 5): the handlers on a real event loop with real signals,
children that ignore SIGINT, and a second Ctrl-C that ends the drain at once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

from sglang_duet.server.lifecycle import Lifecycle
from sglang_duet.server.state import OpenRequest, ServerState


class Stream:
    def __init__(self):
        self.messages = []

    async def send(self, msg):
        self.messages.append(msg)


def test_sigint_starts_the_drain_and_a_second_one_ends_it():
    async def scenario():
        state, exits = ServerState(), []
        life = Lifecycle(state, drain_timeout_s=30.0, exit_fn=exits.append)
        life.stop_own_children = False  # not pytest's other children (shared servers)
        life.attach()
        stream = Stream()
        state.register(OpenRequest("/v1/responses", stream.send, started=True, sse=True))
        try:
            os.kill(os.getpid(), signal.SIGINT)  # a real signal, taken by the loop's handler
            await asyncio.sleep(0.3)
            assert state.draining and exits == []  # draining, still waiting for the stream
            assert "SIGINT" in state.unavailable
            t0 = time.monotonic()
            os.kill(os.getpid(), signal.SIGINT)
            while not exits:
                await asyncio.sleep(0.01)
            return exits, time.monotonic() - t0, stream
        finally:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
                loop.remove_signal_handler(sig)

    exits, took, stream = asyncio.run(scenario())
    assert exits == [0] and took < 2.0  # not the 30 s deadline
    body = b"".join(m.get("body", b"") for m in stream.messages)
    assert body.startswith(b"event: error\ndata: ") and b'"type": "error"' in body


def test_children_ignore_sigint():
    """run_child is every SGLang child's entry: a Ctrl-C to the process group leaves them up."""
    code = ("import time; from sglang_duet.server.lifecycle import run_child; "
            "run_child(lambda: (print('up', flush=True), time.sleep(2))); print('done')")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path[:3])}  # the checkout's package
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env=env)
    assert proc.stdout.readline().strip() == "up"
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0 and out.strip() == "done"
