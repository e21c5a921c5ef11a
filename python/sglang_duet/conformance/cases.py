"""The requests of issue #24, shared by its tests (test/runtime/test_grammar_idle.py,
test/server/test_one_request_cannot_kill.py) and `benchmark.serving.clients`: constrained
requests of every kind, invalid grammars, and single requests that end stock SGLang 0.5.17 (or
that it answers itself), each with what sglang-duet answers."""

from __future__ import annotations

import json
import re

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
                                           "n": {"type": "integer"}},
          "required": ["city", "n"], "additionalProperties": False}
TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}},
                   "required": ["city"]}}}


def generate(sampling: dict) -> tuple[str, dict]:
    return "/generate", {"text": "Answer:", "sampling_params": {
        "max_new_tokens": 48, "temperature": 0, **sampling}}


def chat(**extra) -> tuple[str, dict]:
    return "/v1/chat/completions", {"model": "default", "max_tokens": 48, "temperature": 0,
                                    "messages": [{"role": "user", "content": "weather?"}],
                                    **extra}


def _text(body: dict) -> str:
    return body["text"] if "text" in body else body["choices"][0]["message"]["content"]


def _finish(body: dict) -> str:
    if "meta_info" in body:
        return body["meta_info"]["finish_reason"]["type"]
    return body["choices"][0]["finish_reason"]


def _json_as_constrained(body: dict, schema: bool = False) -> bool:
    """The random tiny model fills flexible JSON whitespace freely, so output may stop at the
    token limit: it must still open a JSON value, and be the schema's JSON when it stopped."""
    text = (_text(body) or "").lstrip()
    if _finish(body) != "stop":
        return text[:1] in ("{", "[")
    obj = json.loads(text)
    return not schema or (isinstance(obj["city"], str) and isinstance(obj["n"], int))


CONSTRAINED = {
    "generate_regex": (generate({"regex": "(yes|no)-[0-9]{2}"}),
                       lambda b: re.fullmatch(r"(yes|no)-[0-9]{2}", _text(b))),
    "generate_json_schema": (generate({"json_schema": json.dumps(SCHEMA)}),
                             lambda b: _json_as_constrained(b, schema=True)),
    "generate_ebnf": (generate({"ebnf": 'root ::= "red" | "green" | "blue"'}),
                      lambda b: _text(b) in ("red", "green", "blue")),
    "chat_json_object": (chat(response_format={"type": "json_object"}), _json_as_constrained),
    "chat_json_schema": (chat(response_format={"type": "json_schema", "json_schema": {
        "name": "w", "schema": SCHEMA}}), lambda b: _json_as_constrained(b, schema=True)),
    "chat_forced_tool_choice": (chat(tools=[TOOL], tool_choice={
        "type": "function", "function": {"name": "get_weather"}}),
        lambda b: b["choices"][0]["message"]["tool_calls"] or _json_as_constrained(b)),
}
INVALID_GRAMMAR = {
    "regex_unclosed": (generate({"regex": "("}), "Failed to compile regex grammar"),
    "json_schema_not_json": (generate({"json_schema": "{not json"}),
                             "Failed to compile json grammar"),
}

# ---- single requests that reach the model as an index --------------------------------------

V = 2048  # the embedded tiny model's vocabulary (python/sglang_duet/tiny_model.py)


def gen(**kw) -> tuple[str, dict]:
    return "/generate", {"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 2}, **kw}


def sampled(**params) -> tuple[str, dict]:
    return "/generate", {"input_ids": [5, 6, 7],
                         "sampling_params": {"max_new_tokens": 2, **params}}


def chat_body(**kw) -> tuple[str, dict]:
    return "/v1/chat/completions", {"model": "default", "max_tokens": 2,
                                    "messages": [{"role": "user", "content": "hi"}], **kw}


def completion(**kw) -> tuple[str, dict]:
    return "/v1/completions", {"model": "default", "prompt": "hi", "max_tokens": 2, **kw}


def user(content) -> tuple[str, dict]:
    message = {"role": "user"} if content is ... else {"role": "user", "content": content}
    return chat_body(messages=[message])


# case -> (path, body, what sglang-duet's 400 says). Stock SGLang 0.5.17 ends the whole server
# on the ones in KILLS (each seen on this setup; one is re-run below) and answers the others as
# STOCK says.
BAD = {
    "generate_prompt_id_over_vocab": (*gen(input_ids=[5, V + 10]),
                                      f"input_ids[1]: token id {V + 10} is outside the "
                                      f"vocabulary [0, {V})"),
    "generate_prompt_id_negative": (*gen(input_ids=[5, -1]), "input_ids[1]: token id -1"),
    "completion_prompt_id_over_vocab": (*completion(prompt=[5, 31999]),
                                        "prompt[1]: token id 31999 is outside"),
    "completion_prompt_id_negative": (*completion(prompt=[5, -3]), "prompt[1]: token id -3"),
    "generate_top_logprobs_num": (*gen(return_logprob=True, top_logprobs_num=V + 5),
                                  f"top_logprobs_num: {V + 5} is more than the vocabulary "
                                  f"size ({V})"),
    "chat_top_logprobs": (*chat_body(logprobs=True, top_logprobs=V + 5),
                          f"top_logprobs: {V + 5} is more than"),
    "completion_logprobs": (*completion(logprobs=V + 5), f"logprobs: {V + 5} is more than"),
    "stop_token_id_with_min_new_tokens": (*sampled(stop_token_ids=[V + 7], min_new_tokens=1),
                                          f"stop_token_ids[0]: token id {V + 7}"),
    "logprob_start_len_negative": (*gen(return_logprob=True, logprob_start_len=-5),
                                   "logprob_start_len: -5; must be -1"),
    "token_ids_logprob_over_vocab": (*gen(return_logprob=True, token_ids_logprob=[V + 3]),
                                     f"token_ids_logprob[0]: token id {V + 3}"),
    "logit_bias_key_over_vocab": (*chat_body(logit_bias={str(V + 3): 1.0}),
                                  f"logit_bias: key {V + 3} is outside"),
    "score_label_negative": ("/v1/score", {"model": "default", "query": "a", "items": ["b"],
                                           "label_token_ids": [-9]},
                             "label_token_ids[0]: token id -9"),
    "detokenize_negative": ("/detokenize", {"model": "default", "tokens": [-5]},
                            "tokens[0]: token id -5"),
    "chat_n_0": (*chat_body(n=0), "n: 0; must be at least 1"),
    "completion_n_0": (*completion(n=0), "n: 0; must be at least 1"),
    "message_input_audio": (*user([{"type": "input_audio", "input_audio": {
        "data": "AAAA", "format": "wav"}}]), 'messages.0.content.0.type: "input_audio" is not '
        "accepted; expected 'audio_url'"),
    "message_unknown_part": (*user([{"type": "foo"}]), 'messages.0.content.0.type: "foo" is '
                                                       "not accepted"),
    "message_null_content": (*user(None), "messages.0.content: got null; expected str or list"),
    "message_missing_content": (*user(...), "messages.0.content: Field required"),
}
KILLS = {"generate_prompt_id_over_vocab", "generate_prompt_id_negative",
         "completion_prompt_id_over_vocab", "completion_prompt_id_negative",
         "generate_top_logprobs_num", "chat_top_logprobs", "completion_logprobs",
         "stop_token_id_with_min_new_tokens", "logprob_start_len_negative"}
# What stock answers for the others (status, a piece of its message).
STOCK = {
    "token_ids_logprob_over_vocab": (400, "out-of-vocabulary token id"),
    "logit_bias_key_over_vocab": (400, "logit_bias must has keys in"),
    "score_label_negative": (400, "out-of-vocabulary token id -9"),
    "detokenize_negative": (500, "out of range integral type conversion"),
    "chat_n_0": (400, "range() arg 3 must not be zero"),
    "completion_n_0": (400, "range() arg 3 must not be zero"),
    "message_input_audio": (400, "validation errors"),
    "message_unknown_part": (400, "validation errors"),
    "message_null_content": (400, "validation errors"),
    "message_missing_content": (400, "validation errors"),
}


