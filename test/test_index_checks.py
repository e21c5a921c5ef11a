"""Fields that reach the model as an index, checked against its bounds (no server): each bad
value is a BodyError naming the field and the bound; valid values, text prompts and values of
other types pass (those are judged elsewhere)."""

from __future__ import annotations

import pytest

from sglang_duet.index_checks import ModelBounds, check
from sglang_duet.validation import BodyError

B = ModelBounds(vocab_size=2048, hidden_size=64)
GEN = "/generate"


def reason(path, body, bounds=B) -> str | None:
    try:
        check(path, body, bounds)
    except BodyError as e:
        assert e.status == 400
        return str(e)
    return None


@pytest.mark.parametrize("path, body, needle", [
    (GEN, {"input_ids": [5, 2048]}, "input_ids[1]: token id 2048 is outside the vocabulary "
     "[0, 2048)"),
    (GEN, {"input_ids": [5, -1]}, "input_ids[1]: token id -1 is outside"),
    (GEN, {"input_ids": [[5], [6, 31999]]}, "input_ids[1][1]: token id 31999"),
    ("/v1/completions", {"prompt": [5, 31999]}, "prompt[1]: token id 31999"),
    ("/v1/completions", {"prompt": [[5, -3]]}, "prompt[0][1]: token id -3"),
    ("/v1/chat/completions", {"input_ids": [9999]}, "input_ids[0]: token id 9999"),
    (GEN, {"top_logprobs_num": 2049}, "top_logprobs_num: 2049 is more than the vocabulary "
     "size (2048)"),
    (GEN, {"top_logprobs_num": [1, 5000]}, "top_logprobs_num: 5000"),
    ("/v1/chat/completions", {"top_logprobs": 3000}, "top_logprobs: 3000 is more than"),
    ("/invocations", {"top_logprobs": 3000}, "top_logprobs: 3000 is more than"),
    ("/v1/completions", {"logprobs": 3000}, "logprobs: 3000 is more than"),
    ("/v1/responses", {"top_logprobs": 3000}, "top_logprobs: 3000 is more than"),
    (GEN, {"token_ids_logprob": [1, 4096]}, "token_ids_logprob[1]: token id 4096"),
    (GEN, {"logprob_start_len": -5}, "logprob_start_len: -5; must be -1"),
    (GEN, {"sampling_params": {"stop_token_ids": [2100], "min_new_tokens": 1}},
     "sampling_params.stop_token_ids[0]: token id 2100 is outside the vocabulary [0, 2048) "
     "(with sampling_params.min_new_tokens > 0"),
    (GEN, {"sampling_params": [{}, {"stop_token_ids": [-2], "min_new_tokens": 3}]},
     "sampling_params[1].stop_token_ids[0]: token id -2"),
    (GEN, {"sampling_params": {"logit_bias": {"2048": 1.0}}},
     "sampling_params.logit_bias: key 2048 is outside"),
    (GEN, {"sampling_params": {"logit_bias": {"x": 1.0}}}, "key 'x' is not a token id"),
    (GEN, {"sampling_params": {"n": 0}}, "sampling_params.n: 0; must be at least 1"),
    ("/v1/chat/completions", {"n": 0}, "n: 0; must be at least 1"),
    ("/v1/completions", {"n": -1}, "n: -1; must be at least 1"),
    ("/v1/chat/completions", {"stop_token_ids": [5000], "min_tokens": 2},
     "stop_token_ids[0]: token id 5000 is outside the vocabulary [0, 2048) (with min_tokens"),
    ("/v1/chat/completions", {"logit_bias": {"-4": 1}}, "logit_bias: key -4 is outside"),
    (GEN, {"input_embeds": [[0.1] * 64, [0.2] * 3]}, "input_embeds[1]: 3 values; every row "
     "must have the model's hidden size, 64"),
    (GEN, {"input_embeds": [[[0.1] * 64], [[0.1] * 5]]}, "input_embeds[1][0]: 5 values"),
    (GEN, {"positional_embed_overrides": {"positions": [0]}},
     "positional_embed_overrides: set by SGLang itself"),
    (GEN, {"lora_id": "x"}, "lora_id: set by SGLang from lora_path"),
    ("/v1/score", {"query": [5, 6], "items": [[7], [2049]]}, "items[1][0]: token id 2049"),
    ("/v1/score", {"label_token_ids": [-9]}, "label_token_ids[0]: token id -9"),
    ("/v1/embeddings", {"input": [5, 2048]}, "input[1]: token id 2048"),
    ("/detokenize", {"tokens": [-5]}, "tokens[0]: token id -5"),
    ("/v1/detokenize", {"tokens": [[1], [99999]]}, "tokens[1][0]: token id 99999"),
    ("/encode", {"input_ids": [3000]}, "input_ids[0]: token id 3000"),
    ("/vertex_generate", {"instances": [{"input_ids": [5, 4000]}]},
     "input_ids[0][1]: token id 4000"),
    ("/vertex_generate", {"instances": [{"text": "hi"}],
                          "parameters": {"top_logprobs_num": 9999}}, "top_logprobs_num: 9999"),
])
def test_out_of_bounds_named(path, body, needle):
    got = reason(path, body)
    assert got is not None and needle in got, got


@pytest.mark.parametrize("path, body", [
    (GEN, {"input_ids": [0, 5, 2047], "top_logprobs_num": 2048, "logprob_start_len": -1}),
    (GEN, {"text": "hello", "sampling_params": {"stop_token_ids": [0], "n": 2,
                                                "logit_bias": {"7": -100}}}),
    (GEN, {"input_ids": [1], "logprob_start_len": 0, "lora_path": "a", "lora_id": "a-1"}),
    (GEN, {"input_embeds": [[0.0] * 64] * 3}),
    # an id outside the vocabulary that can only never match (SGLang's JSON kit sends one)
    (GEN, {"text": "x", "sampling_params": {"stop_token_ids": [119690], "min_new_tokens": 0}}),
    ("/v1/chat/completions", {"messages": [], "stop_token_ids": [-1]}),
    ("/v1/completions", {"prompt": ["text", "more"], "logprobs": 5, "n": 1}),
    ("/v1/chat/completions", {"messages": [], "top_logprobs": 20, "logit_bias": {"0": 1}}),
    ("/v1/score", {"query": "a", "items": ["b"], "label_token_ids": [1, 2]}),
    ("/tokenize", {"prompt": [99999]}),  # not a route whose fields index the model
    (GEN, {"input_ids": "not a list", "top_logprobs_num": "x"}),  # types are judged elsewhere
])
def test_valid_and_other_types_pass(path, body):
    assert reason(path, body) is None


def test_nothing_checked_before_the_bounds_are_known():
    assert reason(GEN, {"input_ids": [10**9]}, bounds=None) is None


def test_unknown_hidden_size_skips_the_shape_check():
    assert reason(GEN, {"input_embeds": [[0.1] * 3]}, ModelBounds(2048)) is None
