"""sglang_duet.local_server without starting SGLang: the repo root, the command line, the HTTP
client calls against a standard-library stand-in, and what it (and the test helpers) import."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import threading
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
