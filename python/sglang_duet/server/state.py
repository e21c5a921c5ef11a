"""The server's life as the HTTP side sees it: serving, draining, or dead; and the open requests.

One `ServerState` is shared by the middleware (which registers every generation request and
answers 503 when not serving) and the lifecycle (which drains or fails the open requests).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from sglang_duet.index_checks import ModelBounds
from sglang_duet.server.errors import error_body, sse_error_event
from sglang_duet.server.redact import Redactor

logger = logging.getLogger("sglang_duet.server")


@dataclass
class OpenRequest:
    """One generation request between its first byte in and its last byte out."""

    path: str
    send: Callable  # the server's ASGI send (not the app's wrapped one)
    started: bool = False  # response start sent
    sse: bool = False  # text/event-stream
    closed: bool = False  # our side ended it (the app's later sends are dropped)
    done: asyncio.Event = field(default_factory=asyncio.Event)


class ServerState:
    def __init__(self) -> None:
        self.draining = False
        self.dead: str | None = None
        self.ready = False  # set once SGLang is up and the children are watched
        self.open: dict[int, OpenRequest] = {}
        self._ids = itertools.count()
        # Known after start-up (launch_server's callback): prompt limits for early rejection.
        self.max_prompt_tokens: int | None = None
        self.max_token_chars: int | None = None
        self.bounds: ModelBounds | None = None  # vocabulary and hidden size of the model
        # Known before start-up (install.launch_kwargs): secrets no answer may carry, and the
        # requests answered 400 because SGLang's scheduler would die of them (path -> reason).
        self.redactor = Redactor()
        self.refused: dict[str, str] = {}
        self.api_key: str | None = None  # --api-key: asked of websockets too

    @property
    def unavailable(self) -> str | None:
        """Why new generation requests get 503 now, or None while serving."""
        if self.dead:
            return f"server is shutting down: {self.dead}"
        if self.draining:
            return "server is draining (SIGTERM or SIGINT) and takes no new requests"
        return None

    def register(self, req: OpenRequest) -> int:
        key = next(self._ids)
        self.open[key] = req
        return key

    def unregister(self, key: int) -> None:
        req = self.open.pop(key, None)
        if req is not None:
            req.done.set()

    async def fail_open(self, reason: str) -> int:
        """End every open request now: streams get an SSE error event, requests still waiting
        for their answer get a 503 JSON. Returns how many were ended."""
        ended = 0
        for req in list(self.open.values()):
            if req.closed:
                continue
            req.closed = True
            ended += 1
            try:
                if not req.started:
                    body = error_body(503, reason)
                    await req.send({"type": "http.response.start", "status": 503, "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode())]})
                    await req.send({"type": "http.response.body", "body": body})
                elif req.sse:
                    await req.send({"type": "http.response.body",
                                    "body": sse_error_event(503, reason, req.path),
                                    "more_body": False})
                else:  # a plain response already under way cannot change its status
                    await req.send({"type": "http.response.body", "body": b"",
                                    "more_body": False})
            except Exception as e:  # the client may be gone already
                logger.debug("ending an open request: %s", e)
        return ended
