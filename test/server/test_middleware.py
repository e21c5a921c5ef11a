"""The HTTP protections of #16 (items 2, 4, 5, 6, 7), driven through the ASGI middleware with a
fake app standing in for SGLang (no server needed)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from sglang_duet.server.config import ServeArgs
from sglang_duet.server.middleware import DuetMiddleware
from sglang_duet.server.state import ServerState
from sglang_duet.validation import CHAT, COMPLETIONS, GENERATE, known_fields, openai_fields

from .asgi import body_json, call


@pytest.fixture(scope="module")
def table():
    return known_fields()


class FakeApp:
    """Answers 200 JSON echoing the body; special paths fail in the ways SGLang can."""

    def __init__(self):
        self.seen = []

    async def __call__(self, scope, receive, send):
        msg = await receive() if scope["method"] == "POST" else {"body": b""}
        self.seen.append((scope["path"], msg.get("body", b"")))
        if scope["path"] == "/boom":
            raise RuntimeError('File "/home/user/sglang/srt/x.py", line 3: kaboom')
        if scope["path"] == "/leaky":
            text = ('Traceback (most recent call last):\n  File "/usr/lib/python3/x.py", '
                    'line 9, in f\nValueError: bad model /root/.cache/m')
            body = json.dumps({"object": "error", "message": text}).encode()
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"ok": true}'})


def mw(table, **limits):
    app = FakeApp()
    return DuetMiddleware(app, ServeArgs(**limits), ServerState(), table), app


def run(coro):
    return asyncio.run(coro)


def test_nesting_bomb_is_a_400(table):
    m, app = mw(table)
    bomb = b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    out = run(call(m, GENERATE, bomb))
    assert out["status"] == 400 and "nested too deeply" in body_json(out)["message"]
    assert app.seen == []


def test_exception_becomes_json_500_without_paths(table):
    m, _ = mw(table)
    out = run(call(m, "/boom", b"{}"))
    assert out["status"] == 500
    msg = body_json(out)["message"]
    assert "/home" not in msg and ".py" not in msg and "kaboom" not in out["body"].decode()
    assert "connection" not in out["headers"]  # the keep-alive connection stays usable


def test_error_bodies_are_scrubbed(table):
    m, _ = mw(table)
    out = run(call(m, "/leaky", b"{}"))
    text = out["body"].decode()
    assert out["status"] == 400
    assert "Traceback" not in text and "/usr/lib" not in text and "/root" not in text
    assert "bad model" in text
    assert int(out["headers"]["content-length"]) == len(out["body"])


@pytest.mark.parametrize("chunk", [None, 1 << 16])
def test_body_limit_413_names_the_limit(table, chunk):
    m, app = mw(table, max_body_mb=1.0)
    big = json.dumps({"text": "x" * (2 << 20)}).encode()
    out = run(call(m, GENERATE, big, chunk=chunk))
    assert out["status"] == 413
    assert "1 MiB" in body_json(out)["message"] and "--duet-max-body-mb" in body_json(out)[
        "message"]
    assert app.seen == []


@pytest.mark.parametrize("path, body, field", [
    (GENERATE, {"text": "x", "sampling_params": {"max_new_tokens": "ten"}},
     "sampling_params.max_new_tokens"),
    (GENERATE, {"text": "x", "sampling_params": {"temperature": "hot"}},
     "sampling_params.temperature"),
    (GENERATE, {"text": 5}, "text"),
    (COMPLETIONS, {"model": "m", "prompt": "x", "max_tokens": "ten"}, "max_tokens"),
    (CHAT, {"model": "m", "messages": [{"role": "user", "content": "x"}],
            "temperature": "hot"}, "temperature"),
])
def test_wrong_types_are_400_naming_the_field(table, path, body, field):
    m, app = mw(table)
    out = run(call(m, path, json.dumps(body).encode()))
    assert out["status"] == 400, out
    assert body_json(out)["message"].startswith(field), body_json(out)
    assert app.seen == []


@pytest.mark.parametrize("path", [GENERATE, COMPLETIONS, CHAT])
def test_array_body_is_400(table, path):
    m, _ = mw(table)
    out = run(call(m, path, b"[1, 2]"))
    assert out["status"] == 400 and "JSON object" in body_json(out)["message"]


# Values where SGLang's own request model (like OpenAI's) refuses null.
SAMPLE = {"frequency_penalty": 0.0, "presence_penalty": 0.0, "logprobs": False, "n": 1,
          "parallel_tool_calls": True, "stream": False, "echo": False, "max_tokens": 4,
          "temperature": 0.5, "top_p": 1.0}
BASE = {CHAT: {"model": "m", "messages": [{"role": "user", "content": "x"}]},
        COMPLETIONS: {"model": "m", "prompt": "x"}}


@pytest.mark.parametrize("path", [CHAT, COMPLETIONS])
def test_every_openai_field_is_accepted(table, path):
    """The field list comes from the installed openai package, so it cannot rot."""
    names = openai_fields()[path]
    assert {"model", "temperature"} <= names
    m, app = mw(table)
    for name in sorted(names - set(BASE[path])):
        body = {**BASE[path], name: SAMPLE.get(name)}
        out = run(call(m, path, json.dumps(body).encode()))
        assert out["status"] == 200, (name, out["body"])
    ignored = table[path].openai_only
    body = {**BASE[path], **{n: None for n in ignored}}
    out = run(call(m, path, json.dumps(body).encode()))
    assert out["status"] == 200
    if ignored:
        assert all(n in out["headers"]["warning"] for n in ignored)


def test_chat_fields_the_probe_found_rejected(table):
    m, _ = mw(table)
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "store": True,
            "metadata": {"a": "b"}, "service_tier": "auto", "modalities": ["text"],
            "prompt_cache_key": "k", "safety_identifier": "s", "verbosity": "low"}
    assert run(call(m, CHAT, json.dumps(body).encode()))["status"] == 200


def test_unknown_fields_400_unless_strictness_off(table):
    body = json.dumps({"model": "m", "prompt": "x", "max_token": 2}).encode()
    m, _ = mw(table)
    out = run(call(m, COMPLETIONS, body))
    assert out["status"] == 400 and "max_token" in body_json(out)["message"]
    m, _ = mw(table, strict_fields=False)
    assert run(call(m, COMPLETIONS, body))["status"] == 200


def test_known_long_prompt_rejected_before_the_app(table):
    m, app = mw(table)
    m.state.max_prompt_tokens, m.state.max_token_chars = 100, 8
    out = run(call(m, GENERATE, json.dumps({"input_ids": list(range(101))}).encode()))
    assert out["status"] == 400 and "101 tokens" in body_json(out)["message"]
    out = run(call(m, CHAT, json.dumps({"model": "m", "messages": [
        {"role": "user", "content": "y" * 801}]}).encode()))
    assert out["status"] == 400 and "before tokenizing" in body_json(out)["message"]
    out = run(call(m, GENERATE, json.dumps({"input_ids": list(range(100))}).encode()))
    assert out["status"] == 200


def test_health_answers_fast_while_a_large_body_is_judged(table):
    """A 12 MB body is parsed and checked off the event loop; /health does not wait for it."""
    m, _ = mw(table, max_body_mb=64.0)
    m.state.max_prompt_tokens, m.state.max_token_chars = 4096, 16
    big = json.dumps({"text": "word " * (12 << 18), "sampling_params": {}}).encode()

    async def both():
        slow = asyncio.ensure_future(call(m, GENERATE, big))
        await asyncio.sleep(0.01)
        t0 = time.perf_counter()
        health = await call(m, "/health", None, method="GET")
        took = time.perf_counter() - t0
        return await slow, health, took

    slow, health, took = run(both())
    assert slow["status"] == 400 and health["status"] == 200
    assert took < 0.1, took


def test_health_is_answered_at_once_once_ready(table):
    m, app = mw(table)
    out = run(call(m, "/health", None, method="GET"))
    assert out["status"] == 200 and app.seen == [("/health", b"")]  # not ready: SGLang answers
    m.state.ready = True
    t0 = time.perf_counter()
    out = run(call(m, "/health", None, method="GET"))
    assert out["status"] == 200 and len(app.seen) == 1 and time.perf_counter() - t0 < 0.1
    run(call(m, "/health_generate", None, method="GET"))  # the deep check stays SGLang's
    assert app.seen[-1][0] == "/health_generate"


def test_503_while_draining_or_dead(table):
    m, app = mw(table)
    m.state.draining = True
    for path, method in ((GENERATE, "POST"), ("/health", "GET"), (CHAT, "POST")):
        out = run(call(m, path, b"{}" if method == "POST" else None, method=method))
        assert out["status"] == 503 and "draining" in body_json(out)["message"]
    assert run(call(m, "/v1/models", None, method="GET"))["status"] == 200
    m.state.draining, m.state.dead = False, "child x died"
    assert run(call(m, "/health", None, method="GET"))["status"] == 503
