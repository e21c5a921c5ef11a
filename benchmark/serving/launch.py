"""Start one stock SGLang or sglang-duet server on a free loopback port, wait for /health, stop it.

Shared by the benchmarks and the tests (test/helpers/server.py re-exports it). The server runs in
its own process group, so `stop()` ends the HTTP server, the scheduler and the detokenizer together.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

import requests

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


def free_port() -> int:
    with socket.socket() as s:
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

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        module = "sglang.launch_server" if self.stock else "sglang_duet.launch_server"
        cmd = [sys.executable, "-m", module, "--host", "127.0.0.1", "--port", str(self.port)]
        cpu = (not cuda_available()) if self.cpu is None else self.cpu
        if self.stock and cpu:
            cmd += STOCK_CPU_FLAGS
        return cmd + list(self.args)

    def start(self, timeout: float = 240.0) -> Server:
        env = child_env()
        if self.stock:  # stock SGLang needs the one CPU patch too (see benchmark/stock_cpu)
            env["PYTHONPATH"] = os.path.join(ROOT, "benchmark", "stock_cpu") + os.pathsep + env[
                "PYTHONPATH"]
        self.log_path = self.log_path or f"/tmp/sglang_duet_test_{self.port}.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                start_new_session=True,
            )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(1.0)
        self.stop()
        raise TimeoutError(f"server not healthy after {timeout}s:\n{self.log()}")

    def log(self, tail: int = 4000) -> str:
        try:
            with open(self.log_path) as f:
                return f.read()[-tail:] if tail else f.read()
        except OSError:
            return ""

    def stop(self) -> None:
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
        r = requests.post(
            self.url + "/generate",
            json={"input_ids": input_ids, "sampling_params": params},
            timeout=300,
        )
        r.raise_for_status()
        return r.json()

    def used_tokens(self) -> int:
        """KV-pool tokens held by requests (the radix cache is flushed first)."""
        requests.post(self.url + "/flush_cache", timeout=30)
        loads = requests.get(self.url + "/v1/loads", timeout=30).json()["loads"]
        return sum(x["num_used_tokens"] for x in loads)
