"""Start a real SGLang / sglang-duet server on this machine for a test session, and stop it."""

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
    "--disable-cuda-graph", "--mem-fraction-static", "0.05", "--max-total-tokens", "16384",
    "--dtype", "float32",
]


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
    args: list[str]
    stock: bool = False
    log_path: str = ""
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 240.0) -> Server:
        module = "sglang.launch_server" if self.stock else "sglang_duet.launch_server"
        env = child_env()
        if self.stock:  # stock SGLang needs the one CPU patch too (see benchmark/stock_cpu)
            env["PYTHONPATH"] = os.path.join(ROOT, "benchmark", "stock_cpu") + os.pathsep + env[
                "PYTHONPATH"]
        cmd = [sys.executable, "-m", module, "--host", "127.0.0.1", "--port", str(self.port)]
        if self.stock:
            cmd += STOCK_CPU_FLAGS
        cmd += self.args
        self.log_path = self.log_path or f"/tmp/sglang_duet_test_{self.port}.log"
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
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
