"""Hugging Face transformers greedy generation: the correctness oracle for the tiny model."""

from __future__ import annotations

import functools
import random

from sglang_duet.tiny_model import default_model_path


@functools.lru_cache(maxsize=1)
def _load(path: str):
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    return model


def hf_greedy(input_ids: list[int], max_new_tokens: int, path: str | None = None) -> list[int]:
    import torch

    model = _load(str(path or default_model_path()))
    # Plain argmax loop: generate() would suppress or stop at EOS, SGLang's ignore_eos does not.
    ids = torch.tensor([input_ids])
    out: list[int] = []
    past = None
    with torch.no_grad():
        for _ in range(max_new_tokens):
            res = model(input_ids=ids, past_key_values=past, use_cache=True)
            past = res.past_key_values
            tok = int(res.logits[0, -1].argmax())
            out.append(tok)
            ids = torch.tensor([[tok]])
    return out


def prompts(n: int, lengths: list[int], seed: int = 0, vocab: int = 2048) -> list[list[int]]:
    """n token-id prompts cycling through `lengths` (ids avoid the 3 special tokens)."""
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(lengths[i % len(lengths)])] for i in range(n)]
