"""Request fields that reach the model as an index, checked against the served model.

Stock SGLang 0.5.17 passes these to the scheduler unchecked, where one bad value ends the whole
server (the scheduler raises, every open request fails, exit 3; measured, README "Reliability"):
a prompt token id outside the vocabulary or negative (embedding lookup), `top_logprobs_num` /
`top_logprobs` / `logprobs` above the vocabulary (top-k), `stop_token_ids` outside it together
with `min_new_tokens` > 0 (a scatter; without it such an id only never matches, and SGLang's own
test kits send one, so it passes), `logprob_start_len` below -1, `positional_embed_overrides`
(an internal object no JSON can build). Each check here names the field and the bound; the
middleware answers 400 and SGLang never sees the request. Checks SGLang already makes itself
(`token_ids_logprob`, `label_token_ids`, `logit_bias` keys) are repeated so that every route
answers alike. Shapes are only read where they are what the check needs; types are the
validation module's (or SGLang's) concern, so a value of an unexpected type passes here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sglang_duet.validation import BodyError


@dataclass(frozen=True)
class ModelBounds:
    """What the served model accepts: token ids in [0, vocab_size); embedding rows of
    `hidden_size` values (None: unknown, not checked)."""

    vocab_size: int
    hidden_size: int | None = None


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _id_lists(value: Any) -> Iterator[tuple[str, list]]:
    """(suffix, flat list) for a list of ids or a list of such lists; nothing for text."""
    if isinstance(value, list) and value and all(_is_int(x) for x in value):
        yield "", value
    elif isinstance(value, list):
        for i, row in enumerate(value):
            if isinstance(row, list) and row and all(_is_int(x) for x in row):
                yield f"[{i}]", row


def token_ids(value: Any, name: str, b: ModelBounds) -> None:
    if _is_int(value):
        value = [value]
    for suffix, ids in _id_lists(value):
        for j, x in enumerate(ids):
            if not 0 <= x < b.vocab_size:
                raise BodyError(f"{name}{suffix}[{j}]: token id {x} is outside the vocabulary "
                                f"[0, {b.vocab_size})")


def _each(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def top_count(value: Any, name: str, b: ModelBounds) -> None:
    """How many top tokens to return: at most the vocabulary."""
    for x in _each(value):
        if _is_int(x) and x > b.vocab_size:
            raise BodyError(f"{name}: {x} is more than the vocabulary size ({b.vocab_size})")


def logprob_start(value: Any, name: str, _b: ModelBounds) -> None:
    for x in _each(value):
        if _is_int(x) and x < -1:
            raise BodyError(f"{name}: {x}; must be -1 (no prompt logprobs) or >= 0")


def at_least_one(value: Any, name: str, _b: ModelBounds) -> None:
    if _is_int(value) and value < 1:
        raise BodyError(f"{name}: {value}; must be at least 1")


def bias_keys(value: Any, name: str, b: ModelBounds) -> None:
    if not isinstance(value, dict):
        return
    for key in value:
        try:
            token = int(key)
        except (TypeError, ValueError):
            raise BodyError(f"{name}: key {key!r} is not a token id") from None
        if not 0 <= token < b.vocab_size:
            raise BodyError(f"{name}: key {token} is outside the vocabulary [0, {b.vocab_size})")


def embedding_rows(value: Any, name: str, b: ModelBounds) -> None:
    """Rows of `input_embeds` (one prompt: a list of rows; a batch: a list of those)."""
    if b.hidden_size is None or not isinstance(value, list):
        return
    prompts = value if value and isinstance(value[0], list) and value[0] and isinstance(
        value[0][0], list) else [value]
    for p, rows in enumerate(prompts):
        for i, row in enumerate(rows if isinstance(rows, list) else []):
            if isinstance(row, list) and len(row) != b.hidden_size:
                where = f"{name}[{p}][{i}]" if len(prompts) > 1 else f"{name}[{i}]"
                raise BodyError(f"{where}: {len(row)} values; every row must have the model's "
                                f"hidden size, {b.hidden_size}")


def not_over_http(value: Any, name: str, _b: ModelBounds) -> None:
    if value is not None:
        raise BodyError(f"{name}: set by SGLang itself, not accepted in a request")


Check = Callable[[Any, str, ModelBounds], None]
SAMPLING: dict[str, Check] = {"logit_bias": bias_keys, "n": at_least_one}
# Top-level fields of each route (the OpenAI routes carry sampling fields at the top level).
OPENAI_COMMON: dict[str, Check] = {"n": at_least_one, "logit_bias": bias_keys}
# Where `stop_token_ids` sits beside the field that makes an id outside the vocabulary fatal.
MIN_TOKENS = {"/generate": "min_new_tokens", "/v1/completions": "min_tokens",
              "/v1/chat/completions": "min_tokens", "/invocations": "min_tokens"}
GENERATE: dict[str, Check] = {
    "input_ids": token_ids, "top_logprobs_num": top_count, "token_ids_logprob": token_ids,
    "logprob_start_len": logprob_start, "input_embeds": embedding_rows,
    "positional_embed_overrides": not_over_http,
}
CHAT = {**OPENAI_COMMON, "input_ids": token_ids, "top_logprobs": top_count}
ROUTES: dict[str, dict[str, Check]] = {
    "/generate": GENERATE,
    "/v1/completions": {**OPENAI_COMMON, "prompt": token_ids, "logprobs": top_count},
    "/v1/chat/completions": CHAT,
    "/invocations": CHAT,  # SageMaker: a chat completion request
    "/v1/responses": {"top_logprobs": top_count},
    "/v1/score": {"query": token_ids, "items": token_ids, "label_token_ids": token_ids,
                  "embed_override_token_id": token_ids},
    "/v1/embeddings": {"input": token_ids, "embed_override_token_id": token_ids},
    "/v1/classify": {"input": token_ids},
    "/encode": {"input_ids": token_ids, "input_embeds": embedding_rows,
                "positional_embed_overrides": not_over_http},
    "/classify": {"input_ids": token_ids, "input_embeds": embedding_rows},
    "/detokenize": {"tokens": token_ids},
    "/v1/detokenize": {"tokens": token_ids},
}


def _lora(body: dict) -> None:
    """SGLang sets `lora_id` from `lora_path`; one sent on its own names no loaded adapter."""
    if body.get("lora_id") is not None and body.get("lora_path") is None:
        raise BodyError("lora_id: set by SGLang from lora_path; name the adapter in lora_path")


def _stop_ids(fields: dict, min_key: str, where: str, b: ModelBounds) -> None:
    """`stop_token_ids` outside the vocabulary, when `min_key` > 0 makes SGLang index with them."""
    least = fields.get(min_key)
    if _is_int(least) and least > 0 and fields.get("stop_token_ids") is not None:
        try:
            token_ids(fields["stop_token_ids"], where + "stop_token_ids", b)
        except BodyError as e:
            raise BodyError(f"{e} (with {where}{min_key} > 0 SGLang indexes with it)") from None


def _sampling(params: Any, b: ModelBounds) -> None:
    for i, p in enumerate(_each(params)):
        if isinstance(p, dict):
            where = f"sampling_params[{i}]." if isinstance(params, list) else "sampling_params."
            for key, check in SAMPLING.items():
                if key in p:
                    check(p[key], where + key, b)
            _stop_ids(p, "min_new_tokens", where, b)


def _vertex_as_generate(body: dict) -> dict:
    """/vertex_generate builds a /generate request from its instances and parameters."""
    instances = body.get("instances")
    out = dict(body.get("parameters") or {}) if isinstance(body.get("parameters"), dict) else {}
    if isinstance(instances, list):
        for key in ("input_ids", "input_embeds"):
            if instances and isinstance(instances[0], dict) and instances[0].get(key):
                out[key] = [i.get(key) for i in instances if isinstance(i, dict)]
                break
    return out


def check(path: str, body: Any, b: ModelBounds | None) -> None:
    """Raise BodyError naming the first field out of bounds on `path` (nothing without
    bounds: the limits are learnt once the server is up)."""
    if b is None or not isinstance(body, dict):
        return
    if path == "/vertex_generate":
        path, body = "/generate", _vertex_as_generate(body)
    fields = ROUTES.get(path)
    if fields is None:
        return
    for key, field_check in fields.items():
        if key in body and body[key] is not None:
            field_check(body[key], key, b)
    if path in ("/generate", "/encode"):
        _lora(body)
        _sampling(body.get("sampling_params"), b)
    elif path in MIN_TOKENS:
        _stop_ids(body, MIN_TOKENS[path], "", b)
