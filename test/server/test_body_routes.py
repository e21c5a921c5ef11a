"""Every route of SGLang's app that takes a body gets the protections of the three generation
routes (#24 item 4), driven through the middleware with a fake app (no server). The routes are
read from SGLang's FastAPI app itself, so a route a later SGLang adds is covered here too."""

from __future__ import annotations

import asyncio
import json
import re
import threading

import pytest

from sglang_duet import index_checks
from sglang_duet.index_checks import ModelBounds
from sglang_duet.server.config import ServeArgs
from sglang_duet.server.errors import sse_error_event
from sglang_duet.server.install import body_routes
from sglang_duet.server.middleware import DRAIN_EXEMPT, DuetMiddleware
from sglang_duet.server.state import OpenRequest, ServerState
from sglang_duet.validation import known_fields

from .asgi import body_json, call


class EchoApp:
    async def __call__(self, scope, receive, send):
        msg = await receive()
        self.seen = (scope["path"], msg.get("body", b""))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})


@pytest.fixture(scope="module")
def routes():
    from sglang.srt.entrypoints.http_server import app

    return body_routes(app)


@pytest.fixture(scope="module")
def table():
    return known_fields()


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", path)


def mw(table, **limits):
    app = EchoApp()
    state = ServerState()
    state.bounds = ModelBounds(2048, 64)
    return DuetMiddleware(app, ServeArgs(**limits), state, table), app


def run(coro):
    return asyncio.run(coro)


def body_methods(methods):
    return sorted(set(methods) & {"POST", "PUT", "PATCH"})


def test_the_app_has_the_routes_the_issue_names(routes):
    for path in ("/generate", "/v1/completions", "/v1/chat/completions", "/v1/responses",
                 "/tokenize", "/v1/embeddings", "/v1/score", "/v1/audio/transcriptions"):
        assert path in routes, path
    assert all(body_methods(m) for m in routes.values()), routes  # none takes GET only


def test_every_body_route_413_over_the_limit(routes, table):
    m, _ = mw(table, max_body_mb=0.5)
    big = b'{"x": "' + b"y" * (1 << 20) + b'"}'
    for path, methods in routes.items():
        for method in body_methods(methods):
            for chunk in (None, 1 << 16):  # declared length, and counted while streamed
                out = run(call(m, concrete(path), big, method=method, chunk=chunk))
                assert out["status"] == 413, (path, method, out["body"][:100])
                assert "0.5 MiB" in body_json(out)["message"]


def test_every_body_route_503_while_draining_but_abort(routes, table):
    m, _ = mw(table)
    m.state.draining = True
    for path, methods in routes.items():
        out = run(call(m, concrete(path), b"{}", method=body_methods(methods)[0]))
        want = 200 if path in DRAIN_EXEMPT else 503
        assert out["status"] == want, (path, out["body"][:100])
    assert "/abort_request" in routes  # the exemption names a real route


def test_large_json_bodies_parsed_off_the_event_loop(routes, table, monkeypatch):
    m, app = mw(table, max_body_mb=4.0)
    threads = []
    judge = m._judge

    def recording(path, raw):
        threads.append(threading.current_thread() is threading.main_thread())
        return judge(path, raw)

    monkeypatch.setattr(m, "_judge", recording)
    big = json.dumps({"padding": "z" * (200 << 10)}).encode()
    for path in ("/v1/responses", "/tokenize", "/v1/embeddings", "/v1/score", "/encode"):
        threads.clear()
        out = run(call(m, path, big, headers=[(b"content-type", b"application/json")]))
        assert threads == [False], path  # judged, in a worker thread
        assert out["status"] in (200, 400) and (out["status"] == 400 or app.seen[1] == big)


def test_invalid_json_and_bombs_are_400_on_every_json_route(routes, table):
    m, _ = mw(table)
    bomb = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    for path, methods in routes.items():
        if path == "/v1/audio/transcriptions":
            continue  # a multipart form, not JSON
        method = body_methods(methods)[0]
        out = run(call(m, concrete(path), b'{"a": ', method=method))
        assert out["status"] == 400 and "not valid JSON" in body_json(out)["message"], path
        out = run(call(m, concrete(path), bomb, method=method))
        assert out["status"] == 400 and "nested too deeply" in body_json(out)["message"], path


def test_multipart_bodies_reach_the_app_unparsed(table):
    m, app = mw(table)
    form = b"--b\r\ncontent-disposition: form-data; name=model\r\n\r\nx\r\n--b--\r\n"
    out = run(call(m, "/v1/audio/transcriptions", form,
                   headers=[(b"content-type", b"multipart/form-data; boundary=b")]))
    assert out["status"] == 200 and app.seen == ("/v1/audio/transcriptions", form)


def test_index_checks_reach_every_route_they_name(routes, table):
    """Each route the index checks know exists in SGLang's app, and each answers 400."""
    m, _ = mw(table)
    for path in index_checks.ROUTES:
        assert path in routes, path
    for path, body in (("/v1/responses", {"model": "m", "input": "x", "top_logprobs": 5000}),
                       ("/v1/score", {"query": [1], "items": [[4000]]}),
                       ("/detokenize", {"tokens": [-1]}),
                       ("/vertex_generate", {"instances": [{"input_ids": [4000]}]})):
        out = run(call(m, path, json.dumps(body).encode()))
        assert out["status"] == 400 and "2048" in body_json(out)["message"], (path, out)


INDEX_LIKE = {"input_ids", "prompt", "tokens", "top_logprobs", "top_logprobs_num", "logprobs",
              "stop_token_ids", "logit_bias", "label_token_ids", "input_embeds", "query",
              "items", "input", "token_ids_logprob", "embed_override_token_id", "instances"}
# Routes with such a field that never index the model with it, and why.
NOT_INDICES = {
    "/tokenize": "prompt is text; its ids come from the tokenizer",
    "/v1/tokenize": "prompt is text; its ids come from the tokenizer",
    "/v1/rerank": "query and documents are text",
    "/api/generate": "prompt is text (Ollama)",
    "/v1/messages/count_tokens": "counts tokens of text messages",
}


def _body_fields(route) -> set[str]:
    import dataclasses

    out: set[str] = set()
    for param in route.dependant.body_params:
        kind = getattr(param.field_info, "annotation", None) or getattr(param, "type_", None)
        if hasattr(kind, "model_fields"):
            out |= set(kind.model_fields)
        elif dataclasses.is_dataclass(kind):
            out |= {f.name for f in dataclasses.fields(kind)}
        out.add(param.name)
    return out


def test_every_route_with_an_index_field_is_checked_or_explained():
    """A new SGLang route whose body has a token-id-like field fails here until it is either
    checked (index_checks.ROUTES) or listed with the reason it needs no check."""
    from sglang.srt.entrypoints.http_server import app

    missing = []
    for route in app.routes:
        if getattr(route, "dependant", None) is None or not route.dependant.body_params:
            continue
        fields = _body_fields(route) & INDEX_LIKE
        known = route.path in index_checks.ROUTES or route.path in NOT_INDICES
        if fields and not known and route.path != "/vertex_generate":
            missing.append((route.path, sorted(fields)))
    assert missing == []


def test_a_responses_stream_ends_with_a_responses_error_event():
    async def scenario():
        state, sent = ServerState(), []

        async def send(msg):
            sent.append(msg)

        state.register(OpenRequest("/v1/responses", send, started=True, sse=True))
        await state.fail_open("server shut down")
        return b"".join(m.get("body", b"") for m in sent)

    raw = run(scenario())
    assert raw == sse_error_event(503, "server shut down", "/v1/responses")
    head, data = raw.decode().strip().split("\n")
    event = json.loads(data.removeprefix("data: "))
    assert head == "event: error" and event["type"] == "error"
    assert event["error"]["message"] == "server shut down" and "[DONE]" not in raw.decode()
