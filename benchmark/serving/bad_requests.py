"""Every kind of bad request issue #16 found, plus the valid OpenAI fields a strict check used to
reject; each is sent as-is and judged by its HTTP answer.

A *clear 4xx* is a 4xx whose body is a JSON error object with a message and no server path or
traceback; anything 5xx on bad input is a defect; a 2xx on bad input means it was not caught.
"""

from __future__ import annotations

import json
import random
import re

GOOD_OPENAI = "openai_fields"  # valid: every field the probe found rejected; must be 200
LEAK = re.compile(r"Traceback|File \"|\.py\b|/home/|/root/|/tmp/|site-packages")


def _ids(rng: random.Random, n: int, vocab: int) -> list[int]:
    return [rng.randrange(3, vocab) for _ in range(n)]


def make(kind: str, rng: random.Random, vocab: int, context: int, body_limit_mb: float
         ) -> tuple[str, bytes]:
    """(path, raw body) of one request of `kind`."""
    chat = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    gen = {"input_ids": _ids(rng, 16, vocab), "sampling_params": {"max_new_tokens": 4}}
    if kind == "malformed_json":
        return "/generate", json.dumps(gen).encode()[:40]
    if kind == "negative_max_tokens":
        gen["sampling_params"]["max_new_tokens"] = -5
        return "/generate", json.dumps(gen).encode()
    if kind == "too_long_prompt":
        gen["input_ids"] = _ids(rng, context + 100, vocab)
        return "/generate", json.dumps(gen).encode()
    if kind == "too_long_text":  # 10 MB of text, under the body limit when the limit allows
        n = min(10 << 20, int(body_limit_mb * (1 << 20)) - 1024)
        return "/v1/completions", json.dumps({"model": "default", "prompt": "x " * (n // 2),
                                              "max_tokens": 4}).encode()
    if kind == "over_body_limit":
        n = int(body_limit_mb * (1 << 20)) + 1024
        return "/generate", json.dumps({"text": "y" * n}).encode()
    if kind == "unknown_field":
        gen["no_such_field"] = 1
        gen["sampling_params"]["no_such_param"] = 2
        return "/generate", json.dumps(gen).encode()
    if kind == "unknown_chat_field":
        return "/v1/chat/completions", json.dumps({**chat, "max_token": 3}).encode()
    if kind == "nesting_bomb":
        return "/generate", b'{"text": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    if kind == "wrong_type_max_new_tokens":
        gen["sampling_params"]["max_new_tokens"] = "ten"
        return "/generate", json.dumps(gen).encode()
    if kind == "wrong_type_temperature":
        return "/v1/chat/completions", json.dumps({**chat, "temperature": "hot"}).encode()
    if kind == "array_chat_body":
        return "/v1/chat/completions", json.dumps([chat]).encode()
    if kind == GOOD_OPENAI:
        extra = {"store": False, "metadata": {"k": "v"}, "service_tier": "auto",
                 "modalities": ["text"], "prompt_cache_key": "p", "safety_identifier": "s",
                 "verbosity": "low", "user": "u", "seed": 1}
        return "/v1/chat/completions", json.dumps({**chat, **extra}).encode()
    raise ValueError(f"unknown bad-request kind {kind!r}")


BAD_KINDS = ("malformed_json", "negative_max_tokens", "too_long_prompt", "too_long_text",
             "over_body_limit", "unknown_field", "unknown_chat_field", "nesting_bomb",
             "wrong_type_max_new_tokens", "wrong_type_temperature", "array_chat_body")


def judge(kind: str, status: int, body: bytes) -> str:
    """clear_4xx | unclear_4xx | 5xx | accepted (bad input served) | ok / rejected (good)."""
    if kind == GOOD_OPENAI:
        return "ok" if status == 200 else "rejected"
    if status >= 500:
        return "5xx"
    if status < 400:
        return "accepted"
    text = body.decode("utf-8", "replace")
    try:
        obj = json.loads(text)
        message = obj.get("message") or (obj.get("error") or {}).get("message")
    except (ValueError, AttributeError):
        message = None
    return "clear_4xx" if message and not LEAK.search(text) else "unclear_4xx"
