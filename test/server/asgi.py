"""A minimal ASGI client for driving the middleware without a server."""

from __future__ import annotations

import asyncio
import json


async def call(app, path, body: bytes | None = None, method="POST", headers=None,
               chunk: int | None = None):
    """Send one request; returns (status, headers dict, body bytes)."""
    headers = list(headers or [])
    if body is not None and chunk is None:
        headers.append((b"content-length", str(len(body)).encode()))
    scope = {"type": "http", "method": method, "path": path, "headers": headers}
    parts = [body or b""] if chunk is None else [body[i:i + chunk] for i in
                                                 range(0, len(body), chunk)] or [b""]
    queue = [{"type": "http.request", "body": p, "more_body": i < len(parts) - 1}
             for i, p in enumerate(parts)]
    out = {"status": None, "headers": {}, "body": b"", "messages": []}

    async def receive():
        if queue:
            return queue.pop(0)
        await asyncio.sleep(3600)

    async def send(msg):
        out["messages"].append(msg)
        if msg["type"] == "http.response.start":
            out["status"] = msg["status"]
            out["headers"] = {k.decode().lower(): v.decode() for k, v in msg["headers"]}
        else:
            out["body"] += msg.get("body", b"")

    await app(scope, receive, send)
    return out


def body_json(out) -> dict:
    return json.loads(out["body"])
