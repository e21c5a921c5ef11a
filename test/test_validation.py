"""Unknown request fields are named in a 400 (checked without a server)."""

from __future__ import annotations

import pytest

from sglang_duet.validation import check_body, known_fields


@pytest.fixture(scope="module")
def table():
    return known_fields()


def test_known_fields_pass(table):
    body = {"text": "x", "sampling_params": {"max_new_tokens": 3, "temperature": 0}}
    assert check_body("/generate", body, table) is None
    assert check_body("/v1/completions", {"model": "m", "prompt": "x", "max_tokens": 2},
                      table) is None
    assert check_body("/v1/chat/completions", {"model": "m", "messages": [], "stream": True},
                      table) is None


def test_ignore_eos_passes_on_every_generation_route(table):
    """SGLang's own extension field, which the server tests send so a token count does not
    hang on the random tiny model's EOS: strict field checking must let it through."""
    assert check_body("/generate", {"text": "x", "sampling_params": {"ignore_eos": True}},
                      table) is None
    assert check_body("/v1/completions", {"model": "m", "prompt": "x", "max_tokens": 2,
                                          "ignore_eos": True}, table) is None
    assert check_body("/v1/chat/completions", {"model": "m", "messages": [],
                                               "ignore_eos": True}, table) is None
    assert "ignore_eo" in check_body("/v1/completions", {"model": "m", "prompt": "x",
                                                         "ignore_eo": True}, table)


def test_gateway_model_field_passes_on_generate(table):
    """sglang-router adds "model" to every /generate it forwards."""
    body = {"input_ids": [1, 2], "model": "m", "sampling_params": {"max_new_tokens": 1}}
    assert check_body("/generate", body, table) is None


def test_unknown_top_level_field_named(table):
    reason = check_body("/v1/completions", {"model": "m", "prompt": "x", "max_token": 2}, table)
    assert "max_token" in reason


def test_unknown_sampling_parameter_named(table):
    reason = check_body("/generate", {"text": "x", "sampling_params": [{"temprature": 0}]}, table)
    assert "temprature" in reason


def test_other_paths_untouched(table):
    assert check_body("/health", {"anything": 1}, table) is None
