"""Two sglang-duet servers behind a real SGLang gateway (`sglang-router`, power_of_two policy,
which polls our latency-model /get_load). Real processes on the CPU (slow: marked `server`)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

pytest.importorskip("sglang_router")

from helpers.server import (  # noqa: E402
    ROOT,
    Server,
    child_env,
    free_port,
    guard_group,
    release_guard,
)

pytestmark = pytest.mark.server

PROMPTS = [[11, 22, 33, 44, 55], [7] * 12, list(range(100, 140)), [5, 4, 3, 2, 1, 9, 9]]


class Gateway:
    def __init__(self, workers: list[str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = f"/tmp/sglang_duet_gateway_{self.port}.log"
        cmd = [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1",
               "--port", str(self.port), "--policy", "power_of_two",
               "--health-check-interval-secs", "1", "--health-failure-threshold", "1",
               "--worker-urls", *workers]
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         env=child_env(), cwd=ROOT, start_new_session=True)
        self.watcher = guard_group(self.proc.pid)  # it dies with this process, however it ends

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert self.proc.poll() is None, self.log()
            try:
                if requests.get(self.url + "/readiness", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(1.0)
        raise TimeoutError(f"gateway not ready:\n{self.log()}")

    def workers(self) -> list[dict]:
        body = requests.get(self.url + "/workers", timeout=10).json()
        return body["workers"] if isinstance(body, dict) else body

    def log(self) -> str:
        with open(self.log_path) as f:
            return f.read()[-4000:]

    def stop(self) -> None:
        try:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=30)
        finally:
            release_guard(self.watcher)


@pytest.fixture(scope="module")
def cluster(request, duet_server, gateway_worker):
    """The session's `duet_server` and `gateway_worker`, a worker of the same configuration (the
    last test kills it), behind the gateway."""
    servers = [duet_server, gateway_worker]
    gw = Gateway([s.url for s in servers])
    request.addfinalizer(gw.stop)
    gw.wait_ready()
    return servers, gw


def _generate(url: str, ids: list[int], n: int = 8, timeout: float = 120) -> dict:
    """Greedy with ignore_eos: exactly n tokens whatever the random model's EOS does."""
    r = requests.post(url + "/generate", timeout=timeout, json={
        "input_ids": ids, "sampling_params": {"max_new_tokens": n, "temperature": 0.0,
                                              "ignore_eos": True}})
    r.raise_for_status()
    return r.json()


def _served(server: Server) -> float:
    text = requests.get(server.url + "/metrics", timeout=10).text
    return sum(float(m) for m in re.findall(r"^sglang:num_requests_total\{[^}]*\} (\S+)", text,
                                            re.M))


def test_get_load_is_the_latency_model_load(cluster):
    servers, _ = cluster
    rows = requests.get(servers[0].url + "/get_load", timeout=10).json()
    assert rows and rows[0]["num_tokens"] == round(rows[0]["duet_load_s"] * 1e6) > 0


def test_greedy_outputs_through_gateway_equal_direct(cluster):
    servers, gw = cluster
    for ids in PROMPTS:
        direct = _generate(servers[0].url, ids)
        routed = _generate(gw.url, ids)
        assert routed["output_ids"] == direct["output_ids"]


def test_200_concurrent_requests_complete_on_both_workers(cluster):
    servers, gw = cluster
    before = [_served(s) for s in servers]
    prompts = [[(7 * i + j) % 500 + 10 for j in range(8 + i % 24)] for i in range(200)]
    with ThreadPoolExecutor(200) as ex:
        outs = list(ex.map(lambda ids: _generate(gw.url, ids, n=4, timeout=600), prompts))
    assert len(outs) == 200
    assert all(len(o["output_ids"]) == 4 for o in outs)
    served = [_served(s) - b for s, b in zip(servers, before, strict=True)]
    assert all(x > 0 for x in served), served
    assert sum(served) >= 200


def test_killed_worker_is_noticed_and_later_requests_complete(cluster):
    servers, gw = cluster
    dead = servers[1]
    os.killpg(dead.proc.pid, signal.SIGKILL)
    dead.proc.wait(timeout=30)
    deadline = time.time() + 60
    while time.time() < deadline:
        entry = [w for w in gw.workers() if w.get("url") == dead.url]
        if not entry or not entry[0].get("is_healthy", True):
            break
        time.sleep(1.0)
    else:
        pytest.fail(f"gateway still lists {dead.url} as healthy: {gw.workers()}")
    with ThreadPoolExecutor(20) as ex:
        outs = list(ex.map(lambda ids: _generate(gw.url, ids, n=4, timeout=120),
                           [PROMPTS[i % 4] for i in range(20)]))
    assert all(len(o["output_ids"]) == 4 for o in outs)
