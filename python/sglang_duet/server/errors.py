"""Error bodies a client may see: JSON, with the reason, never a traceback or a server path."""

from __future__ import annotations

import json
import re

# A traceback, or a file-system path that names this machine's layout.
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|File \"[^\"]*\", line \d+")
_PATH = re.compile(
    r"(?:~|/(?:home|root|tmp|usr|opt|work|var|srv|mnt|data|proc|etc|lib|nix|private))"
    r"(?:/[^\s\"'<>,;:()\[\]{}]*)+"
    r"|[^\s\"'<>,;:()\[\]{}]+\.(?:py|pyc|so)\b(?:, line \d+)?"
)


def scrub(text: str) -> str:
    """`text` without tracebacks (only their last line stays) and with paths as <path>."""
    if _TRACEBACK.search(text):
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        text = lines[-1] if lines else "internal error"
    return _PATH.sub("<path>", text)


def leaks(text: str) -> bool:
    return bool(_TRACEBACK.search(text) or _PATH.search(text))


def error_body(status: int, message: str, kind: str | None = None) -> bytes:
    """SGLang's OpenAI-style error object, so clients parse ours like its own."""
    kind = kind or {400: "BadRequestError", 405: "MethodNotAllowed", 413: "PayloadTooLarge",
                    503: "ServiceUnavailable"}.get(
        status, "InternalServerError" if status >= 500 else "BadRequestError")
    return json.dumps({"object": "error", "type": kind, "code": status,
                       "message": scrub(message)}).encode()


RESPONSES = "/v1/responses"


def sse_error_event(status: int, message: str, path: str = "") -> bytes:
    """The last event of a stream that cannot finish: `data: {"error": ...}` then [DONE] (the
    `openai` client raises APIError on an event with an `error` member). A Responses API stream
    gets its own kind of event instead, `event: error` with a `type: error` body (and the same
    `error` member), and no [DONE], which that API does not use."""
    err = {"message": scrub(message), "type": "ServiceUnavailable", "code": status}
    if path == RESPONSES:
        event = {"type": "error", "code": str(status), "message": err["message"], "param": None,
                 "error": err}
        return b"event: error\ndata: " + json.dumps(event).encode() + b"\n\n"
    return b"data: " + json.dumps({"error": err}).encode() + b"\n\ndata: [DONE]\n\n"


def scrub_json_body(raw: bytes) -> bytes:
    """An error response body with every string scrubbed; non-JSON becomes a JSON error."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return json.dumps({"object": "error", "message": scrub(raw.decode("utf-8", "replace"))
                           or "error"}).encode()

    def walk(x):
        if isinstance(x, str):
            return scrub(x)
        if isinstance(x, list):
            return [walk(v) for v in x]
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        return x

    return json.dumps(walk(obj)).encode()
