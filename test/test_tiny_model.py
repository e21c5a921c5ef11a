"""The embedded tiny model: deterministic for a seed, loadable, not degenerate."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from helpers.reference import hf_greedy
from helpers.server import ROOT, child_env
from sglang_duet.tiny_model import default_model_path, write_tiny_model


def digest(path) -> str:
    return hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()


def test_cli_is_deterministic_for_a_seed(tmp_path):
    """The CLI in another process writes what this process writes for the same seed."""
    subprocess.run([sys.executable, "-m", "sglang_duet.tiny_model", str(tmp_path / "a"),
                    "--seed", "7"], check=True, env=child_env(), cwd=ROOT, timeout=300)
    write_tiny_model(tmp_path / "b", seed=7)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() == (
        tmp_path / "b" / "tokenizer.json").read_bytes()


def test_other_seed_other_weights(tmp_path):
    write_tiny_model(tmp_path / "s1", seed=1)
    assert digest(tmp_path / "s1") != digest(default_model_path())


def test_tokenizer_round_trips_and_has_chat_template():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    text = "def f(x):\n    return x + 1  # ünïcode"
    assert tok.decode(tok(text)["input_ids"]) == text
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                   add_generation_prompt=True)
    assert chat.endswith("<|im_start|>assistant\n")


def test_greedy_output_is_not_one_repeated_token():
    out = hf_greedy([5, 100, 7, 900, 33, 1500], 24)
    assert len(set(out)) > 8


def test_sizes_share_the_recipe_and_reject_unknown_names():
    import pytest

    from sglang_duet.latency import ModelSpec
    from sglang_duet.tiny_model import SIZES

    spec = ModelSpec.from_hf_config(dict(SIZES["cpu-bench"], model_type="qwen3",
                                         torch_dtype="float32"))
    assert 150e6 < spec.weight_bytes < 300e6  # "a few hundred MB fp32"
    assert SIZES["cpu-bench"]["vocab_size"] == SIZES["tiny"]["vocab_size"]  # one tokenizer
    with pytest.raises(ValueError, match="unknown model size"):
        default_model_path(size="huge")
