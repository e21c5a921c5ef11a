"""Every route that takes a body is protected like the generation routes (#24 item 4), and
Ctrl-C drains like SIGTERM (item 5), on real sglang-duet servers: 20 MB bodies to the routes the
issue found unprotected get 413 at once while /health answers; during a drain started by a
Ctrl-C to the process group, new /v1/responses (and /tokenize) requests get 503, open
/v1/responses and chat streams keep streaming, a second Ctrl-C ends them with an error event
each, and the server exits 0 without reporting a dead child."""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import signal
import threading
import time

import pytest
import requests

pytestmark = pytest.mark.server

UNPROTECTED_BEFORE = ("/v1/responses", "/tokenize", "/v1/embeddings", "/v1/score")


def test_20mb_bodies_get_413_and_health_stays_fast(duet_server):
    big = b'{"model": "default", "input": "' + b"x" * (20 << 20) + b'"}'
    with cf.ThreadPoolExecutor(len(UNPROTECTED_BEFORE)) as ex:
        posts = {p: ex.submit(requests.post, duet_server.url + p, data=big, timeout=120,
                              headers={"Content-Type": "application/json"})
                 for p in UNPROTECTED_BEFORE}
        health = []
        while not all(f.done() for f in posts.values()):
            t0 = time.perf_counter()
            assert requests.get(duet_server.url + "/health", timeout=30).status_code == 200
            health.append(time.perf_counter() - t0)
    for path, fut in posts.items():
        r = fut.result()
        assert r.status_code == 413, (path, r.text[:200])
        assert "--duet-max-body-mb" in r.json()["message"]
    # Stock SGLang parsed these for 23-75 s with /health stalled 20-30 s (issue #24); the bound
    # is loose because the client shares the loaded 2-core machine with the server.
    assert max(health, default=0.0) < 3.0, health
    r = requests.post(duet_server.url + "/v1/responses", json={
        "model": "default", "input": "hi", "max_output_tokens": 4}, timeout=60)
    assert r.status_code == 200 and r.json()["status"] == "completed"


class Reader(threading.Thread):
    """Reads one SSE stream to its end: its events, and whether it got going."""

    def __init__(self, url: str, path: str, body: dict):
        super().__init__(daemon=True)
        self.url, self.path, self.body = url, path, body
        self.lines: list[str] = []
        self.started = threading.Event()
        self.status: int | None = None
        self.cut: str | None = None

    def run(self) -> None:
        try:
            with requests.post(self.url + self.path, json=self.body, stream=True,
                               timeout=120) as r:
                self.status = r.status_code
                for line in r.iter_lines():
                    if line:
                        self.lines.append(line.decode())
                        self.started.set()
        except requests.RequestException as e:
            self.cut = repr(e)
        self.started.set()

    def count(self) -> int:
        return len(self.lines)


def test_ctrl_c_drains_and_a_second_ends_open_responses_streams(fresh_server):
    # ignore_eos so the streams outlast the test whatever the random model says: the server's
    # preferred default for /v1/responses (it sends no ignore_eos), the body's own for chat (its
    # request model always sends ignore_eos, false by default, which overrides the preferred one)
    srv = fresh_server(["--duet-drain-timeout-s", "60", "--preferred-sampling-params",
                        json.dumps({"ignore_eos": True})])
    responses = Reader(srv.url, "/v1/responses", {
        "model": "default", "input": "tell me a story", "max_output_tokens": 3000,
        "stream": True})
    chat = Reader(srv.url, "/v1/chat/completions", {
        "model": "default", "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 3000, "stream": True, "ignore_eos": True})
    for r in (responses, chat):
        r.start()
        assert r.started.wait(60) and r.status == 200, (r.status, r.cut)
    os.killpg(srv.proc.pid, signal.SIGINT)  # what a terminal sends on Ctrl-C
    time.sleep(1.0)
    late = requests.post(srv.url + "/v1/responses", json={
        "model": "default", "input": "hi", "max_output_tokens": 2}, timeout=30)
    assert late.status_code == 503 and "draining" in late.json()["message"]
    assert requests.post(srv.url + "/tokenize", json={"prompt": "hi"},
                         timeout=30).status_code == 503
    assert requests.get(srv.url + "/health", timeout=30).status_code == 503
    before = (responses.count(), chat.count())
    time.sleep(1.0)
    assert responses.count() > before[0] and chat.count() > before[1]  # still streaming
    assert srv.proc.poll() is None
    os.killpg(srv.proc.pid, signal.SIGINT)  # the impatient second Ctrl-C
    responses.join(30)
    chat.join(30)
    assert responses.lines[-2:] == ["event: error", responses.lines[-1]]
    event = json.loads(responses.lines[-1].removeprefix("data: "))
    assert event["type"] == "error" and event["error"]["code"] == 503
    assert chat.lines[-1] == "data: [DONE]" and '"error"' in chat.lines[-2]
    assert srv.proc.wait(timeout=30) == 0
    log = srv.log(tail=0)
    assert "SIGINT: draining 2 open request(s)" in log and "died" not in log
