"""What a generation request body must look like, checked before SGLang sees it.

Stock SGLang 0.5.17 ignores unknown top-level fields on /generate, answers an unknown or
mistyped sampling parameter with a plain-text 500, and tokenizes a prompt of any length before
it finds it too long. Here the body is checked once against the request types SGLang declares
(plus every field of the OpenAI request types in the installed `openai` package, which SGLang
accepts and partly ignores), and the verdict names the field. The HTTP side lives in
`sglang_duet.server.middleware`; this module only judges parsed bodies.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any

GENERATE = "/generate"
COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
PATHS = (GENERATE, COMPLETIONS, CHAT)


class BodyError(ValueError):
    """A request body that cannot be served; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RouteSpec:
    """The fields one route accepts. `hints`: field -> type for the shallow type check."""

    fields: frozenset[str]
    openai_only: frozenset[str] = frozenset()  # accepted, ignored by SGLang: warning header
    hints: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] | None = None  # /generate: sampling_params field -> type
    model: Any = None  # pydantic request model (OpenAI routes): validates the types


@dataclass(frozen=True)
class Verdict:
    ignored: tuple[str, ...] = ()  # OpenAI fields SGLang does not use


def openai_fields() -> dict[str, frozenset[str]]:
    """path -> every field of the installed `openai` package's request type for that route."""
    try:
        from openai.types import completion_create_params as comp
        from openai.types.chat import completion_create_params as chat
    except ImportError:
        return {}

    def keys(*typed_dicts: Any) -> frozenset[str]:
        out: set[str] = set()
        for td in typed_dicts:
            out |= set(td.__required_keys__) | set(td.__optional_keys__)
        return frozenset(out)

    return {
        CHAT: keys(chat.CompletionCreateParamsStreaming, chat.CompletionCreateParamsNonStreaming),
        COMPLETIONS: keys(comp.CompletionCreateParamsStreaming,
                          comp.CompletionCreateParamsNonStreaming),
    }


def _model_fields(model: Any) -> frozenset[str]:
    names = set()
    for name, info in model.model_fields.items():
        names.add(name)
        if info.alias:
            names.add(info.alias)
    return frozenset(names)


# Added by SGLang's own gateway (sglang-router 0.3.2) to every /generate it forwards (its
# multi-model routing key); stock SGLang ignores it, so it must pass here too.
GATEWAY_GENERATE_FIELDS = frozenset({"model"})


def known_fields() -> dict[str, RouteSpec]:
    """The route table, from SGLang's own request types (imports SGLang)."""
    from sglang.srt.entrypoints.openai import protocol
    from sglang.srt.managers.io_struct import GenerateReqInput
    from sglang.srt.sampling.sampling_params import SamplingParams

    gen_hints = typing.get_type_hints(GenerateReqInput)
    sampling_hints = typing.get_type_hints(SamplingParams)
    table = {
        GENERATE: RouteSpec(
            frozenset(f.name for f in dataclasses.fields(GenerateReqInput))
            | GATEWAY_GENERATE_FIELDS, hints=gen_hints,
            sampling={k: sampling_hints.get(k, Any) for k in SamplingParams.__struct_fields__}),
    }
    extra = openai_fields()
    for path, model in ((COMPLETIONS, protocol.CompletionRequest),
                        (CHAT, protocol.ChatCompletionRequest)):
        ours = _model_fields(model)
        table[path] = RouteSpec(ours | extra.get(path, frozenset()),
                                openai_only=extra.get(path, frozenset()) - ours, model=model)
    return table


def parse_json(raw: bytes) -> Any:
    """json.loads with the two failures a client can cause turned into 400s."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise BodyError("request body is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise BodyError(f"request body is not valid JSON: {type(e).__name__}") from None


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is None and isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("NoneType", "None")


def matches(value: Any, hint: Any, depth: int = 0) -> bool:
    """A shallow isinstance against a typing hint: unions, lists/sets (one level of elements),
    dicts, int (not bool), float (int too), str, bool; anything else is accepted."""
    origin = typing.get_origin(hint)
    if hint is Any or hint is None:
        return True
    if hint is type(None):
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(matches(value, h, depth) for h in typing.get_args(hint))
    if origin in (list, set, tuple, frozenset) or hint in (list, set):
        if not isinstance(value, list):
            return False
        args = typing.get_args(hint)
        return depth > 0 or not args or all(matches(v, args[0], depth + 1) for v in value)
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    return True


def _check_types(values: dict, hints: dict[str, Any], where: str) -> None:
    for name, value in values.items():
        hint = hints.get(name, Any)
        if not matches(value, hint):
            shown = json.dumps(value)[:40] if not isinstance(value, dict | list) else type(
                value).__name__
            raise BodyError(f"{where}{name}: expected {_type_name(hint)}, got {shown}")


# Literal fields that pick a member of a union (a message's role, a content part's type): a
# member whose tag does not match is not the one the client meant, and its errors mislead.
TAGS = ("role", "type")
_BUILTIN_LABELS = {"str", "int", "float", "bool", "list", "dict", "tuple", "set", "none"}


def _is_label(part: Any) -> bool:
    """A pydantic location element naming a union member (`str`, `list[...]`, a model class,
    `function-after[...]`), not a field."""
    return isinstance(part, str) and (part in _BUILTIN_LABELS or "[" in part or part[:1].isupper())


def _shown_loc(loc: tuple) -> str:
    return ".".join(str(p) for p in loc if not _is_label(p)) or "body"


def _short(x: Any) -> str:
    return "null" if x is None else json.dumps(x)[:40] if isinstance(x, str | int | float) else \
        type(x).__name__


def _pydantic_reason(err: Any) -> str:
    """The one error that says what is wrong. Pydantic reports every member of a union; for a
    user message with a bad content part, the first of those says the role is invalid (the
    generic message type wants another role). Errors inside a member rejected by its tag are
    dropped; a union whose every member was rejected by its tag reports the tag's value."""
    errors = err.errors()
    tagged = [e for e in errors if e.get("loc") and e["loc"][-1] in TAGS
              and e.get("type") in ("literal_error", "value_error")]
    rejected = [e["loc"][:-1] for e in tagged]

    def under(loc: tuple, prefix: tuple) -> bool:
        return loc[:len(prefix)] == prefix

    def live(e: dict) -> bool:
        return not any(under(e["loc"], p) for p in rejected)

    exhausted = [e for e in tagged if not any(under(e["loc"][:-2], p) for p in rejected)
                 and not any(live(x) for x in errors if under(x["loc"], e["loc"][:-2]))]
    if exhausted:
        deepest = max(exhausted, key=lambda e: len(e["loc"]))
        union = deepest["loc"][:-2]
        wanted = sorted({e["msg"].removeprefix("Input should be ").removeprefix("Value error, ")
                         for e in exhausted if e["loc"][:-2] == union})
        return (f"{_shown_loc(deepest['loc'])}: {_short(deepest.get('input'))} is not accepted; "
                f"expected {'; '.join(wanted)}")
    alive = [e for e in errors if live(e)] or errors
    # A member rejected for its shape (a list where `str` was one choice) loses to a member that
    # took the value and failed deeper; when every member was rejected so, say which shapes fit.
    shaped = [e["loc"] for e in alive if e.get("type", "").endswith("_type") and e["loc"]
              and _is_label(e["loc"][-1])]
    deeper = [e for e in alive if not any(under(e["loc"], p) for p in shaped)]
    first = (deeper or alive)[0]
    where = _shown_loc(first["loc"])
    same = [e for e in alive if _shown_loc(e["loc"]) == where]
    if len(same) > 1 and all(e.get("type", "").endswith("_type") for e in same):
        kinds = " or ".join(str(e["loc"][-1]).split("[")[0] for e in same)
        return f"{where}: got {_short(first.get('input'))}; expected {kinds}"
    return f"{where}: {first.get('msg', 'invalid value')}"


def check_generate(body: dict, spec: RouteSpec, strict: bool) -> None:
    params = body.get("sampling_params")
    items = params if isinstance(params, list) else [params] if params is not None else []
    for p in items:
        if not isinstance(p, dict):
            raise BodyError("sampling_params must be an object (or a list of objects)")
        if strict and spec.sampling is not None:
            bad = sorted(k for k in p if k not in spec.sampling)
            if bad:
                raise BodyError(f"unknown sampling parameter(s) {bad}")
        _check_types(p, spec.sampling or {}, "sampling_params.")
    _check_types({k: v for k, v in body.items() if k != "sampling_params"}, spec.hints, "")


def prompt_tokens_known(path: str, body: dict) -> int | None:
    """The longest prompt in tokens when the body gives token ids, else None."""
    ids = body.get("input_ids") if path == GENERATE else body.get("prompt")
    if not isinstance(ids, list) or not ids:
        return None
    if all(isinstance(x, int) for x in ids[:8]):
        return len(ids)
    if all(isinstance(x, list) for x in ids):
        return max(len(x) for x in ids)
    return None


def prompt_chars(path: str, body: dict) -> int:
    """Characters of prompt text (chat: all message contents); 0 when the body has none."""
    if path == CHAT:
        total = 0
        for m in body.get("messages") or []:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, str):
                total += len(content)
            elif isinstance(content, list):
                total += sum(len(c.get("text") or "") for c in content if isinstance(c, dict))
        return total
    text = body.get("text") if path == GENERATE else body.get("prompt")
    if isinstance(text, str):
        return len(text)
    if isinstance(text, list) and all(isinstance(t, str) for t in text):
        return max((len(t) for t in text), default=0)
    return 0


def check_length(path: str, body: dict, max_tokens: int | None, max_token_chars: int | None
                 ) -> None:
    """Reject prompts over `max_tokens` before tokenizing: token ids are counted; text is
    rejected only when even `max_token_chars` characters per token cannot fit it."""
    if not max_tokens:
        return
    n = prompt_tokens_known(path, body)
    if n is not None and n > max_tokens:
        raise BodyError(f"prompt is {n} tokens; this server accepts at most {max_tokens}")
    if max_token_chars:
        chars = prompt_chars(path, body)
        if chars > max_tokens * max_token_chars:
            raise BodyError(f"prompt of {chars} characters is over {max_tokens} tokens (at most "
                            f"{max_token_chars} characters per token); rejected before "
                            "tokenizing")


def check_request(path: str, body: Any, table: dict[str, RouteSpec], strict: bool = True,
                  max_tokens: int | None = None, max_token_chars: int | None = None) -> Verdict:
    """Raise BodyError (with the field named) or return what to warn about."""
    spec = table.get(path)
    if spec is None:
        return Verdict()
    if not isinstance(body, dict):
        raise BodyError(f"request body must be a JSON object, got {type(body).__name__}")
    if strict:
        unknown = sorted(k for k in body if k not in spec.fields)
        if unknown:
            raise BodyError(f"unknown field(s) {unknown} for {path}")
    if path == GENERATE:
        check_generate(body, spec, strict)
    elif spec.model is not None:
        try:
            spec.model.model_validate(body)
        except RecursionError:
            raise BodyError("request body is nested too deeply") from None
        except Exception as e:  # pydantic.ValidationError; anything else is SGLang's to answer
            if type(e).__name__ == "ValidationError":
                raise BodyError(_pydantic_reason(e)) from None
    check_length(path, body, max_tokens, max_token_chars)
    return Verdict(ignored=tuple(sorted(k for k in body if k in spec.openai_only)))


def check_body(path: str, body: Any, table: dict[str, RouteSpec]) -> str | None:
    """The reason to reject `body` on `path`, or None (strict field names and types)."""
    try:
        check_request(path, body, table)
    except BodyError as e:
        return str(e)
    return None
