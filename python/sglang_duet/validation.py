"""Reject requests with unknown fields with HTTP 400 and a reason, before SGLang sees them.

Stock SGLang 0.5.17 ignores unknown top-level fields on /generate and the OpenAI routes, and
answers an unknown sampling parameter with a 500. A client's typo (`max_token`, `temprature`)
then silently changes nothing, or looks like a server failure. This ASGI middleware checks the
JSON body's keys against the request types SGLang itself declares, and passes everything else
through untouched (bodies are buffered once and replayed to the app).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

Scope = dict[str, Any]


def _generate_fields() -> frozenset[str]:
    from sglang.srt.managers.io_struct import GenerateReqInput

    return frozenset(f.name for f in dataclasses.fields(GenerateReqInput))


def _model_fields(model: Any) -> frozenset[str]:
    names = set()
    for name, info in model.model_fields.items():
        names.add(name)
        if info.alias:
            names.add(info.alias)
    return frozenset(names)


def _sampling_fields() -> frozenset[str]:
    from sglang.srt.sampling.sampling_params import SamplingParams

    return frozenset(SamplingParams.__struct_fields__)


# Added by SGLang's own gateway (sglang-router 0.3.2) to every /generate it forwards (its
# multi-model routing key); stock SGLang ignores it, so it must pass here too.
GATEWAY_GENERATE_FIELDS = frozenset({"model"})


def known_fields() -> dict[str, tuple[frozenset[str], frozenset[str] | None]]:
    """path -> (top-level fields, sampling_params fields or None)."""
    from sglang.srt.entrypoints.openai import protocol

    sampling = _sampling_fields()
    return {
        "/generate": (_generate_fields() | GATEWAY_GENERATE_FIELDS, sampling),
        "/v1/completions": (_model_fields(protocol.CompletionRequest), None),
        "/v1/chat/completions": (_model_fields(protocol.ChatCompletionRequest), None),
    }


def check_body(path: str, body: Any, table: dict) -> str | None:
    """The reason to reject `body` on `path`, or None. Only field names are checked here."""
    if path not in table or not isinstance(body, dict):
        return None
    top, sampling = table[path]
    unknown = sorted(k for k in body if k not in top)
    if unknown:
        return f"unknown field(s) {unknown} for {path}"
    params = body.get("sampling_params")
    if sampling is not None and params is not None:
        items = params if isinstance(params, list) else [params]
        for p in items:
            if not isinstance(p, dict):
                return "sampling_params must be an object (or a list of objects)"
            bad = sorted(k for k in p if k not in sampling)
            if bad:
                return f"unknown sampling parameter(s) {bad}"
    return None


class UnknownFieldsMiddleware:
    def __init__(self, app: Callable, table: dict | None = None):
        self.app = app
        self.table = table if table is not None else known_fields()

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or (
            scope.get("path") not in self.table
        ):
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            chunks.append(msg.get("body", b""))
            more = msg.get("more_body", False)
        raw = b"".join(chunks)
        try:
            reason = check_body(scope["path"], json.loads(raw), self.table)
        except ValueError:
            reason = None  # malformed JSON: SGLang answers it with its own 400
        if reason is not None:
            payload = json.dumps(
                {"object": "error", "type": "BadRequestError", "code": 400, "message": reason}
            ).encode()
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(payload)).encode())]})
            await send({"type": "http.response.body", "body": payload})
            return
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def install(app: Any) -> None:
    """Add the middleware to SGLang's FastAPI app (before the server starts)."""
    app.add_middleware(UnknownFieldsMiddleware)
