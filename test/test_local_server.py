"""sglang_duet.local_server without starting SGLang: the repo root, the command line, the HTTP
client calls against a standard-library stand-in, and what it (and the test helpers) import."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sglang_duet import local_server as ls

REPO = Path(__file__).resolve().parent.parent


def test_root_is_the_checkout():
    assert Path(ls.ROOT) == REPO
    assert (Path(ls.ROOT) / "benchmark" / "stock_cpu" / "sitecustomize.py").is_file()
    env = ls.child_env()
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [str(REPO / "python"), str(REPO)]
    assert env["HF_HUB_OFFLINE"] == "1"


def test_command_lines():
    duet = ls.Server(["--x", "1"], port=1234, cpu=True)
    assert duet.command()[1:] == ["-m", "sglang_duet.launch_server", "--host", "127.0.0.1",
                                  "--port", "1234", "--x", "1"]
    stock = ls.Server(["--x"], stock=True, port=9, cpu=True).command()
    assert stock[2] == "sglang.launch_server" and stock[-1] == "--x"
    assert ls.STOCK_CPU_FLAGS == stock[7:-1]
    assert ls.Server([], stock=True, port=9, cpu=False).command()[-1] == "9"
    assert duet.url == "http://127.0.0.1:1234"


def test_ports_are_below_the_ephemeral_range_and_never_repeat(tmp_path):
    rng = tmp_path / "range"
    rng.write_text("32768\t60999\n")
    assert ls._ephemeral_low(str(rng)) == 32768
    assert ls._ephemeral_low(str(tmp_path / "missing")) == 32768
    low = ls._ephemeral_low()
    ports = [ls.free_port() for _ in range(50)]
    assert len(set(ports)) == 50 and all(ls._PORT_FLOOR <= p < max(low, 21000) for p in ports)


@pytest.mark.parametrize("args, picked", [
    (["--tp-size", "2"], True),
    (["--dp-size", "2"], False),
    (["--data-parallel-size=2"], False),
    (["--dp-size", "1"], True),
    (["--nccl-port", "23456"], False),
])
def test_the_nccl_port_is_picked_unless_given_or_data_parallel(args, picked):
    srv = ls.Server(args, port=1234, cpu=True)
    srv._pick_nccl_port()
    cmd = srv.command()
    assert (srv.nccl_port is not None) == picked
    assert cmd.count("--nccl-port") == (1 if picked or "--nccl-port" in args else 0)
    if picked:
        assert cmd[cmd.index("--nccl-port") + 1] == str(srv.nccl_port)


def test_import_is_standard_library_only():
    code = ("import sys, sglang_duet.local_server; "
            "print([m for m in ('torch', 'sglang', 'requests', 'benchmark') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "python")}, timeout=60,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_test_helpers_import_no_benchmark_code():
    for path in (REPO / "test" / "helpers").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] == "benchmark" for n in names), path.name


class _Fake(BaseHTTPRequestHandler):
    """/health, /generate (echoes), /flush_cache (refused: 400), /v1/loads, else 404."""

    def log_message(self, *args):
        pass

    def _reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self._reply(200, {})
        elif self.path == "/v1/loads":
            self._reply(200, {"loads": [{"num_used_tokens": 3}, {"num_used_tokens": 4}]})
        else:
            self._reply(404, {"error": "no"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/generate":
            req = json.loads(body)
            self._reply(200, {"output_ids": req["input_ids"], "params": req["sampling_params"]})
        elif self.path == "/flush_cache":
            self._reply(400, {"error": "requests running"})
        else:
            self._reply(404, {"error": "no"})


@pytest.fixture
def fake():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield ls.Server([], port=httpd.server_address[1])
    httpd.shutdown()
    httpd.server_close()


def test_client_calls(fake):
    assert ls._healthy(fake.url)
    out = fake.generate([1, 2, 3], 4, ignore_eos=True)
    assert out["output_ids"] == [1, 2, 3]
    assert out["params"] == {"max_new_tokens": 4, "temperature": 0.0, "ignore_eos": True}
    assert fake.used_tokens() == 7  # a refused flush is not an error
    with pytest.raises(urllib.error.HTTPError):
        ls.http_json(fake.url + "/nothing")
    assert not ls._healthy(f"http://127.0.0.1:{ls.free_port()}")


# ---- a test server dies with its owner (issue 25 item 6) ---------------------------------------

# Stands in for `launch_server`: answers /health and, like SGLang, has a child of its own.
FAKE_SERVER = """import http.server, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""
# The owner (a test process): starts the fake through Server.start, prints the group, waits.
OWNER = """import sys, time
from sglang_duet import local_server as ls
class Fake(ls.Server):
    def command(self):
        return [sys.executable, "-c", sys.argv[1], str(self.port)]
srv = Fake([], log_path=sys.argv[2]).start(timeout=60)
print(srv.proc.pid, srv.watcher.pid, flush=True)
time.sleep(600)
"""


def _live_in_group(pgid: int) -> list[int]:
    """Pids of the group's processes that are not zombies (an orphan's zombie waits for init)."""
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":  # state, ppid, pgrp
            live.append(int(stat.parent.name))
    return live


def _wait_gone(pgid: int, timeout: float = 30.0) -> list[int]:
    deadline = time.time() + timeout
    while (live := _live_in_group(pgid)) and time.time() < deadline:
        time.sleep(0.1)
    return live


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_server_group_dies_with_a_killed_owner(tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, FAKE_SERVER, str(tmp_path / "log")],
                             stdout=subprocess.PIPE, text=True, env={
                                 **os.environ, "PYTHONPATH": str(REPO / "python")})
    pgid = None
    try:
        pgid, watcher = map(int, owner.stdout.readline().split())
        deadline = time.time() + 30
        while len(_live_in_group(pgid)) < 2 and time.time() < deadline:
            time.sleep(0.1)
        assert len(_live_in_group(pgid)) == 2  # the server and its child, running
        time.sleep(1.0)
        assert len(_live_in_group(pgid)) == 2  # and they stay while their owner lives
        owner.kill()  # SIGKILL: no finalizer, no atexit
        owner.wait(timeout=30)
        assert _wait_gone(pgid) == []
        assert _wait_gone(watcher) == []  # the watcher went too (its own group)
    finally:
        owner.kill()
        owner.wait(timeout=30)
        for pid in _live_in_group(pgid) if pgid else []:
            os.kill(pid, signal.SIGKILL)


def test_stop_ends_the_group_and_the_watcher(tmp_path):
    class Fake(ls.Server):
        def command(self):
            return [sys.executable, "-c", FAKE_SERVER, str(self.port)]

    srv = Fake([], log_path=str(tmp_path / "log")).start(timeout=60)
    pgid, watcher = srv.proc.pid, srv.watcher
    assert len(_live_in_group(pgid)) == 2 and watcher.poll() is None
    srv.stop()
    assert _wait_gone(pgid) == [] and watcher.poll() is not None and srv.watcher is None
    srv.stop()  # twice is harmless
