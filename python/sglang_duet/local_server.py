"""Start one stock SGLang or sglang-duet server on a free loopback port of this machine, wait for
/health, stop it. The tests (test/helpers/server.py) and the benchmarks use it.

The server runs in its own process group, so `stop()` ends the HTTP server, the scheduler and the
detokenizer together. A watcher process (`guard_group`) kills that group when the process that
started it ends without `stop()` (SIGKILL, a crash, an interrupted pytest), so nothing is left
behind holding ports, memory and CPU. Standard library only (urllib for the HTTP calls); torch is
imported only by `cuda_available()`, and SGLang only in the child process.

`ROOT` is the checkout this module was loaded from (python/sglang_duet/ is two levels below it; an
editable install points back at the same files). The child gets ROOT/python and ROOT on PYTHONPATH
and runs in ROOT; a stock server also gets ROOT/benchmark/stock_cpu (its one CPU patch).
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Flags stock SGLang needs on the CPU (sglang_duet applies these itself).
STOCK_CPU_FLAGS = [
    "--device", "cpu", "--attention-backend", "torch_native", "--sampling-backend", "pytorch",
    "--disable-cuda-graph", "--mem-fraction-static", "0.5", "--max-total-tokens", "16384",
    "--dtype", "float32", "--sleep-on-idle",
]


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _ephemeral_low(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int:
    """The lowest port the kernel hands out for bind(0) and outgoing connections (Linux)."""
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default range is 32768-60999


_GIVEN: set[int] = set()  # ports this process handed out (another server may not bind them yet)
_PORT_FLOOR = 20000


def free_port() -> int:
    """A loopback port that is free now and below the kernel's ephemeral range, never the same
    twice in one process. Below that range, no outgoing connection and no other process's
    bind(0) can take the port between this check and the server's bind seconds later (both
    happened: a TP rank's torch.distributed store failed with EADDRINUSE when several servers
    started at once); across processes, a random pick makes a clash unlikely."""
    high = max(_ephemeral_low(), _PORT_FLOOR + 1000)
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(_PORT_FLOOR, high)
        if port in _GIVEN:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _GIVEN.add(port)
        return port
    with socket.socket() as s:  # the range is crowded: any free port
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "python"), ROOT, env.get("PYTHONPATH", "")]
    )
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    return env


# The watcher: blocks reading a pipe whose write end only the owner holds. The kernel closes it
# when the owner ends, however it ends, and the read returns EOF: then the whole group is killed.
# `-I -S`: no site-packages, nothing to import, a few milliseconds to start.
_WATCHER = """import os, signal, sys
while os.read(0, 512):
    pass
try:
    os.killpg(int(sys.argv[1]), signal.SIGKILL)
except OSError:
    pass
"""


def guard_group(pgid: int) -> subprocess.Popen:
    """Starts the watcher of process group `pgid` (in its own session, so a Ctrl-C or a kill of
    the owner's group does not reach it); `release_guard` stops it without killing the group."""
    return subprocess.Popen([sys.executable, "-I", "-S", "-c", _WATCHER, str(pgid)],
                            stdin=subprocess.PIPE, start_new_session=True)


def release_guard(watcher: subprocess.Popen | None) -> None:
    """Ends the watcher (SIGKILL, before its pipe closes: it must not kill a group whose number
    may since belong to someone else) and reaps it."""
    if watcher is None:
        return
    watcher.kill()
    watcher.wait(timeout=10)
    if watcher.stdin is not None:
        watcher.stdin.close()


def http_json(url: str, body: Any = None, timeout: float = 30.0) -> Any:
    """GET `url` (or POST `body` as JSON) and parse the JSON reply; urllib.error.HTTPError on a
    4xx/5xx reply, urllib.error.URLError / OSError when nothing answers."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        raw = r.read()
    return json.loads(raw) if raw.strip() else None


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


@dataclass
class Server:
    """`stock=True`: `python -m sglang.launch_server`; else `python -m sglang_duet.launch_server`.

    `cpu=None` adds STOCK_CPU_FLAGS to a stock server when torch sees no CUDA device.
    """

    args: list[str]
    stock: bool = False
    log_path: str = ""
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    cpu: bool | None = None
    env: dict[str, str] = field(default_factory=dict)  # added to the child's environment
    watcher: subprocess.Popen | None = None
    # torch.distributed's store port, picked by `start` like `port` (SGLang's own pick is an
    # ephemeral port, which a client connection can take before the TP ranks bind it)
    nccl_port: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        module = "sglang.launch_server" if self.stock else "sglang_duet.launch_server"
        cmd = [sys.executable, "-m", module, "--host", "127.0.0.1", "--port", str(self.port)]
        cpu = (not cuda_available()) if self.cpu is None else self.cpu
        if self.stock and cpu:
            cmd += STOCK_CPU_FLAGS
        if self.nccl_port is not None:
            cmd += ["--nccl-port", str(self.nccl_port)]
        return cmd + list(self.args)

    def _pick_nccl_port(self) -> None:
        """Picks `nccl_port` unless the arguments name one, or run data-parallel replicas (each
        replica takes its own port from SGLang; a given one would be bound twice)."""
        if self.nccl_port is not None or any(a.split("=")[0] == "--nccl-port" for a in self.args):
            return
        for i, a in enumerate(self.args):
            name, _, value = a.partition("=")
            if name in ("--dp-size", "--data-parallel-size"):
                value = value or (self.args[i + 1] if i + 1 < len(self.args) else "1")
                if value != "1":
                    return
        self.nccl_port = free_port()

    def start(self, timeout: float = 240.0) -> Server:
        self._pick_nccl_port()
        env = {**child_env(), **self.env}
        if self.stock:  # stock SGLang needs the one CPU patch too (see benchmark/stock_cpu)
            env["PYTHONPATH"] = os.path.join(ROOT, "benchmark", "stock_cpu") + os.pathsep + env[
                "PYTHONPATH"]
        self.log_path = self.log_path or f"/tmp/sglang_duet_test_{self.port}.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                start_new_session=True,
            )
        self.watcher = guard_group(self.proc.pid)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            if _healthy(self.url):
                return self
            time.sleep(0.25)  # ready within a quarter second of healthy
        self.stop()
        raise TimeoutError(f"server not healthy after {timeout}s:\n{self.log()}")

    def log(self, tail: int = 4000) -> str:
        try:
            with open(self.log_path) as f:
                return f.read()[-tail:] if tail else f.read()
        except OSError:
            return ""

    def stop(self) -> None:
        try:
            self._stop_group()
        finally:
            release_guard(self.watcher)
            self.watcher = None

    def _stop_group(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- client helpers -------------------------------------------------------------------

    def generate(self, input_ids: list[int], max_new_tokens: int, **sampling) -> dict:
        params = {"max_new_tokens": max_new_tokens, "temperature": 0.0, **sampling}
        return http_json(self.url + "/generate",
                         {"input_ids": input_ids, "sampling_params": params}, timeout=300)

    def used_tokens(self) -> int:
        """KV-pool tokens held by requests (the radix cache is flushed first)."""
        req = urllib.request.Request(self.url + "/flush_cache", data=b"", method="POST")
        try:  # a refused flush (requests still running) just leaves the cache in the count
            with urllib.request.urlopen(req, timeout=30) as r:
                r.read()
        except urllib.error.HTTPError:
            pass
        loads = http_json(self.url + "/v1/loads")["loads"]
        return sum(x["num_used_tokens"] for x in loads)
