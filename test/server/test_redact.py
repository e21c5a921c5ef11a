"""No answer carries a secret (#51 item 1), without a server: which `ServerArgs` fields are
secret, and the middleware redacting them on fixed-length, streamed and error answers of a fake
app. The real server's answers are checked in test_auth_matrix.py."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re

import pytest

from sglang_duet.server.config import ServeArgs
from sglang_duet.server.middleware import DuetMiddleware
from sglang_duet.server.redact import MIN_VALUE_CHARS, REDACTED, Redactor, secret_fields
from sglang_duet.server.state import ServerState

from .asgi import call

# Any field whose name looks sensitive: it is redacted, or allowed below with its reason.
LOOKS_SENSITIVE = re.compile(
    r"key|secret|token|passw|pwd|credential|auth|cert|private|salt|signature|cookie|bearer|jwt"
    r"|session|extra_config|endpoint|url", re.I)
PATH = "a file path; the file's content is never sent"
COUNT = "a count, size or setting of the model's tokens, not an authentication token"
ADDRESS = "a network address or URL of a peer this server connects to, not a credential"
SETTING = "a feature switch or number"
ALLOWED = {
    "ssl_keyfile": PATH, "ssl_certfile": PATH, "ssl_ca_certs": PATH,
    "speculative_token_map": PATH, "lmcache_config_file": PATH, "flexkv_config_file": PATH,
    "decrypted_config_file": PATH, "decrypted_draft_config_file": PATH,
    "pdmux_config_path": PATH,
    "tokenizer_path": PATH, "tokenizer_mode": COUNT, "tokenizer_backend": COUNT,
    "tokenizer_worker_num": COUNT, "detokenizer_worker_num": COUNT,
    "skip_tokenizer_init": COUNT, "max_total_tokens": COUNT, "max_prefill_tokens": COUNT,
    "swa_full_tokens_ratio": COUNT, "bucket_time_to_first_token": COUNT,
    "bucket_inter_token_latency": COUNT,
    "prompt_tokens_buckets": COUNT, "generation_tokens_buckets": COUNT,
    "speculative_num_draft_tokens": COUNT,
    "speculative_dspark_align_verify_tokens_to_graph_tier": COUNT,
    "speculative_ngram_external_corpus_max_tokens": COUNT,
    "tbo_token_distribution_threshold": COUNT, "kt_max_deferred_experts_per_token": COUNT,
    "num_reserved_decode_tokens": COUNT, "prefill_delayer_token_usage_low_watermark": COUNT,
    "enable_dynamic_batch_tokenizer": COUNT, "dynamic_batch_tokenizer_batch_size": COUNT,
    "dynamic_batch_tokenizer_batch_timeout": COUNT, "enable_tokenizer_batch_encode": COUNT,
    "disable_tokenizer_batch_decode": COUNT,
    "tokenizer_metrics_custom_labels_header": "the name of a request header, not its value",
    "tokenizer_metrics_allowed_custom_labels": "metric label names",
    "asr_max_concurrent_sessions": SETTING, "enable_streaming_session": SETTING,
    "enable_session_radix_cache": SETTING,
    "otlp_traces_endpoint": ADDRESS, "decoupled_spec_bind_endpoint": ADDRESS,
    "decoupled_spec_connect_endpoints": ADDRESS, "encoder_urls": ADDRESS,
    "encoder_register_urls": ADDRESS,
}


@pytest.fixture(scope="module")
def server_args_cls():
    return pytest.importorskip("sglang.srt.server_args").ServerArgs


def test_every_sensitive_looking_field_is_redacted_or_allowed(server_args_cls):
    secret = set(secret_fields(server_args_cls))
    assert {"api_key", "admin_api_key", "ssl_keyfile_password"} <= secret
    names = {f.name for f in dataclasses.fields(server_args_cls)}
    looks = {n for n in names if LOOKS_SENSITIVE.search(n)}
    unjudged = looks - secret - set(ALLOWED)
    assert not unjudged, f"ServerArgs fields to redact (SECRET_FIELD) or allow: {unjudged}"
    assert not secret & set(ALLOWED)
    assert set(ALLOWED) <= names, set(ALLOWED) - names  # no stale entry


def test_the_pattern_covers_future_key_fields():
    @dataclasses.dataclass
    class Future:
        hf_token: str = ""
        storage_secret_access: str = ""
        db_password: str = ""
        metrics_api_key: str = ""
        max_total_tokens: int = 0
        speculative_token_map: str = ""

    assert set(secret_fields(Future)) == {"hf_token", "storage_secret_access", "db_password",
                                          "metrics_api_key"}


@dataclasses.dataclass
class Args:
    api_key: str | None = "normal-key-1234"
    admin_api_key: str | None = 'admin"key\\é5678'
    ssl_keyfile_password: str | None = None
    model_loader_extra_config: str = "{}"
    hicache_storage_backend_extra_config: str | None = None
    port: int = 1


def test_redactor_fields_and_values():
    r = Redactor.for_server(Args())
    assert r.active and set(r.values) >= {"normal-key-1234", 'admin"key\\é5678'}
    info = {**dataclasses.asdict(Args()), "internal_states": [dataclasses.asdict(Args())]}
    out = json.loads(r.body(json.dumps(info).encode(), json_body=True))
    assert out["api_key"] == out["admin_api_key"] == REDACTED
    assert out["internal_states"][0]["admin_api_key"] == REDACTED
    assert out["ssl_keyfile_password"] is None and out["port"] == 1  # nothing to hide
    text = b"echo normal-key-1234 and " + json.dumps('admin"key\\\xe95678').encode()
    assert r.chunk(text) == f"echo {REDACTED} and \"{REDACTED}\"".encode()
    assert not Redactor.for_server(Args(api_key=None, admin_api_key=None)).active


def test_short_values_are_redacted_by_field_only():
    r = Redactor.for_server(Args(api_key="k" * (MIN_VALUE_CHARS - 1), admin_api_key=None))
    assert r.chunk(b"kkkkk kkkk") == b"kkkkk kkkk"
    assert json.loads(r.body(b'{"api_key": "kkkkk"}', json_body=True)) == {"api_key": REDACTED}


class App:
    """Answers like SGLang's routes: /server_info fixed-length JSON, /stream SSE, /bad a 400."""

    async def __call__(self, scope, receive, send):
        ctype, status = b"application/json", 200
        body = json.dumps(dataclasses.asdict(Args())).encode()
        if scope["path"] == "/stream":
            ctype = b"text/event-stream"
        elif scope["path"] == "/bad":
            status, body = 400, json.dumps({"message": "bad key normal-key-1234"}).encode()
        headers = [(b"content-type", ctype)]
        if scope["path"] != "/stream":
            headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        for i in range(0, len(body), 7):  # in pieces, as a streaming body would come
            await send({"type": "http.response.body", "body": body[i:i + 7], "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def answer(path: str, method: str = "GET", state: ServerState | None = None,
           body: bytes | None = None):
    if state is None:
        state = ServerState()
        state.redactor = Redactor.for_server(Args())
    return asyncio.run(call(DuetMiddleware(App(), ServeArgs(), state, {}), path, body,
                            method=method))


@pytest.mark.parametrize("path", ["/server_info", "/bad"])
def test_middleware_redacts_whole_answers(path):
    out = answer(path)
    assert b"normal-key-1234" not in out["body"] and b"5678" not in out["body"]
    assert int(out["headers"]["content-length"]) == len(out["body"])
    assert REDACTED.encode() in out["body"]


def test_middleware_redacts_values_in_streams():
    out = answer("/stream")
    assert out["status"] == 200 and b"normal-key-1234" not in out["body"]


def test_without_secrets_answers_pass_unchanged():
    out = answer("/server_info", state=ServerState())
    assert json.loads(out["body"])["api_key"] == "normal-key-1234"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
@pytest.mark.parametrize("path", ["/health", "/health_generate"])
def test_health_answers_get_and_head_only(path, method):
    state = ServerState()
    state.ready = True
    out = answer(path, method, state, body=b"x" * 1000)
    assert out["status"] == 405 and out["headers"]["allow"] == "GET, HEAD"
    assert "GET and HEAD only" in json.loads(out["body"])["message"]
    assert answer("/health", "HEAD", state)["status"] == 200
    assert answer("/health", "GET", state)["status"] == 200


@pytest.mark.parametrize("auth, opened", [
    (None, False), (b"Bearer wrong-key-000", False), (b"normal-key-1234", False),
    (b"Bearer normal-key-1234", True), (b"bearer normal-key-1234", True)])
def test_websockets_need_the_normal_key(auth, opened):
    """SGLang's key check lets every websocket (/v1/realtime) through; ours does not."""
    reached = []

    async def app(scope, receive, send):
        reached.append(scope["path"])
        await send({"type": "websocket.accept"})

    state = ServerState()
    state.api_key = "normal-key-1234"
    sent = []

    async def send(msg):
        sent.append(msg)

    scope = {"type": "websocket", "path": "/v1/realtime",
             "headers": [(b"authorization", auth)] if auth else []}
    asyncio.run(DuetMiddleware(app, ServeArgs(), state, {})(scope, None, send))
    assert bool(reached) == opened
    assert sent[0]["type"] == ("websocket.accept" if opened else "websocket.close")
