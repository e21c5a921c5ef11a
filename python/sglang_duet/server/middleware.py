"""ASGI middleware in front of SGLang's FastAPI app (installed by sglang_duet.launch_server only).

It sits inside SGLang's API-key middleware: only requests with the right key reach it (and the
health and metrics paths, which SGLang leaves open). For every request: /health answers GET and
HEAD at once (200 once started with every child alive, 503 when draining or dead; SGLang's deep
one-token check stays at /health_generate) and any other method with a 405, its body unread;
a request SGLang's scheduler would die of gets a 400 naming the flag it needs
(`install.refusals`); an exception escaping the app becomes a JSON 500 on a connection that
stays usable; error bodies never carry a traceback or a server path (the log keeps the
original); no answer carries a secret server argument (`redact.py`: fixed-length answers are
redacted whole, streamed ones piece by piece); a websocket (which SGLang's key check passes
unchecked) is refused without the normal key. For every request that
carries a body (POST, PUT, PATCH: every route of SGLang's app that takes one, present or future,
`install.body_routes`) also: 503 while draining or dead (but /abort_request, which helps a drain
end); 413 over the body limit, before the body is read; JSON parsed and checked off the event
loop when large (so /health stays fast); 400 for invalid JSON, nesting bombs and fields that
reach the model as an index out of its bounds (`index_checks`); on the three generation routes
also 400 naming unknown fields, wrong types and prompts known to be too long, and a `Warning`
header naming OpenAI fields that are ignored; and the request registered in `ServerState`
until its last byte, so a drain or a child's death can end it with an error event instead of a
cut connection.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable
from typing import Any

from sglang_duet import index_checks, validation
from sglang_duet.server.config import ServeArgs
from sglang_duet.server.errors import error_body, leaks, scrub, scrub_json_body
from sglang_duet.server.state import OpenRequest, ServerState

logger = logging.getLogger("sglang_duet.server")

HEALTH_PATHS = ("/health", "/health_generate")
HEALTH_METHODS = ("GET", "HEAD")
THREAD_PARSE_BYTES = 64 * 1024  # bodies above this are parsed and checked in a worker thread
BODY_METHODS = ("POST", "PUT", "PATCH")
DRAIN_EXEMPT = ("/abort_request",)  # cancelling requests helps a drain end: served while draining


async def send_json(send: Callable, status: int, message: str,
                    headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = error_body(status, message)
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class DuetMiddleware:
    def __init__(self, app: Callable, limits: ServeArgs | None = None,
                 state: ServerState | None = None, table: dict | None = None,
                 on_startup: Callable[[], None] | None = None):
        self.app = app
        self.limits = limits or ServeArgs()
        self.state = state or ServerState()
        self.table = table if table is not None else validation.known_fields()
        self.on_startup = on_startup

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan" and self.on_startup is not None:
            hook, self.on_startup = self.on_startup, None
            try:  # on the server's event loop, after the server installed its own handlers
                hook()
            except (RuntimeError, ValueError) as e:  # not the main thread: keep SGLang's
                logger.warning("sglang-duet signal handlers not installed: %s", e)
        if scope["type"] == "websocket" and not self._key_ok(scope):
            # SGLang's key check passes every websocket (/v1/realtime) through unchecked;
            # closing before accepting answers the handshake with a 403
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path in HEALTH_PATHS and scope.get("method") not in HEALTH_METHODS:
            # SGLang's routes are GET only; the body of any other method is never read
            await send_json(send, 405, f"{path} answers GET and HEAD only",
                            [(b"allow", b"GET, HEAD"), (b"connection", b"close")])
            return
        if path in HEALTH_PATHS and self.state.unavailable:
            await send_json(send, 503, self.state.unavailable)
            return
        if path == "/health" and self.state.ready:
            # Answered here, at once: every child is alive (polled every 0.25 s) and the server
            # is neither draining nor dead. SGLang's own /health runs a one-token generation and
            # takes >= 1 s (it polls in 1 s sleeps); that deep check stays at /health_generate.
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        refused = self.state.refused.get(path)
        if refused is not None:  # a request SGLang's scheduler would die of (install.refusals)
            await send_json(send, 400, refused)
            return
        if scope.get("method") in BODY_METHODS:
            await self._with_body(scope, receive, send, path)
        else:  # health checks are tracked too: one waiting on a dead child gets its 503
            await self._guarded(scope, receive, send, path, track=path in HEALTH_PATHS)

    def _key_ok(self, scope: dict) -> bool:
        """The request carries `Bearer <--api-key>` (or no key is configured): what SGLang's
        check asks of a normal route, compared in constant time as it does."""
        if not self.state.api_key:
            return True
        auth = dict(scope.get("headers") or []).get(b"authorization", b"")
        scheme, _, token = auth.decode("latin-1").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            token.encode(), self.state.api_key.encode())

    async def _with_body(self, scope: dict, receive: Callable, send: Callable, path: str) -> None:
        if self.state.unavailable and path not in DRAIN_EXEMPT:
            await send_json(send, 503, self.state.unavailable, [(b"retry-after", b"5")])
            return
        limit = self.limits.max_body_bytes
        too_big = (f"request body over the {self.limits.max_body_mb:g} MiB limit "
                   "(--duet-max-body-mb)")
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await send_json(send, 413, too_big, [(b"connection", b"close")])
            return
        chunks, size, more = [], 0, True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > limit:
                await send_json(send, 413, too_big, [(b"connection", b"close")])
                return
            chunks.append(chunk)
            more = msg.get("more_body", False)
        raw = b"".join(chunks)
        verdict = validation.Verdict()
        if path in self.table or (raw and is_json(headers.get(b"content-type"))):
            try:
                if len(raw) > THREAD_PARSE_BYTES:
                    verdict = await asyncio.to_thread(self._judge, path, raw)
                else:
                    verdict = self._judge(path, raw)
            except validation.BodyError as e:
                await send_json(send, e.status, str(e))
                return
        extra = []
        if verdict.ignored:
            text = f'299 sglang-duet "ignored OpenAI field(s): {", ".join(verdict.ignored)}"'
            extra.append((b"warning", text.encode()))
        await self._guarded(scope, _replay(raw, receive), send, path, track=True,
                            extra_headers=extra)

    def _judge(self, path: str, raw: bytes) -> validation.Verdict:
        body = validation.parse_json(raw)
        verdict = validation.check_request(
            path, body, self.table, strict=self.limits.strict_fields,
            max_tokens=self.state.max_prompt_tokens, max_token_chars=self.state.max_token_chars)
        index_checks.check(path, body, self.state.bounds)
        return verdict

    async def _guarded(self, scope: dict, receive: Callable, send: Callable, path: str,
                       track: bool, extra_headers: list | None = None) -> None:
        """Run the app; track generation requests; scrub error bodies; contain exceptions."""
        req = OpenRequest(path, send)
        key = self.state.register(req) if track else None
        error: dict[str, Any] = {}  # status and buffered body of an error response

        redactor = self.state.redactor
        held: dict[str, Any] = {}  # a fixed-length answer, redacted once whole

        async def wrapped(msg: dict) -> None:
            if req.closed:
                return  # a drain or a dead child already ended this response
            if msg["type"] == "http.response.start":
                req.started = True
                headers = list(msg.get("headers") or [])
                ctype = dict(headers).get(b"content-type", b"")
                req.sse = ctype.startswith(b"text/event-stream")
                if msg["status"] >= 400 and not req.sse:
                    error["start"] = {**msg, "headers": headers}
                    error["body"] = b""
                    return
                msg = {**msg, "headers": headers + (extra_headers or [])}
                if (redactor.active and b"content-length" in dict(headers)
                        and scope.get("method") != "HEAD"):
                    held["start"], held["body"] = msg, b""
                    return
            elif msg["type"] == "http.response.body" and "start" in error:
                error["body"] += msg.get("body", b"")
                if msg.get("more_body", False):
                    return
                await self._send_error(send, error["start"], error["body"], path)
                return
            elif msg["type"] == "http.response.body" and "start" in held:
                held["body"] += msg.get("body", b"")
                if msg.get("more_body", False):
                    return
                await _send_whole(send, held["start"], redactor.body(held["body"], is_json(
                    dict(held["start"]["headers"]).get(b"content-type"))))
                return
            elif msg["type"] == "http.response.body":
                body = msg.get("body", b"")
                if redactor.active:
                    body, held["carry"] = redactor.stream(held.get("carry", b""), body,
                                                          last=not msg.get("more_body", False))
                if req.sse and b'"error"' in body:
                    body = scrub(body.decode("utf-8", "replace")).encode()
                msg = {**msg, "body": body}
            await send(msg)

        try:
            await self.app(scope, receive, wrapped)
        except Exception:
            logger.exception("request to %s failed", path)
            if not req.started and not req.closed:
                await send_json(send, 500, "internal server error (details are in the log)")
            elif not req.closed:
                req.closed = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if key is not None:
                self.state.unregister(key)

    async def _send_error(self, send: Callable, start: dict, body: bytes, path: str) -> None:
        text = body.decode("utf-8", "replace")
        if leaks(text):
            logger.warning("error answer to %s scrubbed of paths/traceback; original: %s", path,
                           text[:4000])
        clean = scrub_json_body(body) if body else error_body(start["status"], "error")
        clean = self.state.redactor.body(clean, json_body=True)
        headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-type"]
        await _send_whole(send, {**start, "headers": headers + [
            (b"content-type", b"application/json")]}, clean)


async def _send_whole(send: Callable, start: dict, body: bytes) -> None:
    """`start` (its content-length set to the body's) then `body`, in one piece."""
    headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
    await send({**start, "headers": headers + [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def is_json(content_type: bytes | None) -> bool:
    """FastAPI reads a body as JSON when its type is absent, application/json or +json."""
    if not content_type:
        return True
    kind = content_type.split(b";")[0].strip().lower()
    return kind == b"application/json" or (kind.startswith(b"application/")
                                            and kind.endswith(b"+json"))


def _replay(raw: bytes, receive: Callable) -> Callable:
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return replay
