"""The embedded default model: a tiny random-weight Qwen3 with an offline-trained BPE tokenizer.

Used on machines without a GPU, and as the correctness oracle in tests (fp32 weights drawn with
std 0.2, so greedy decoding does not collapse onto one repeated token). Nothing is downloaded:
the tokenizer is trained with the `tokenizers` library on Python standard-library sources that
ship with every interpreter.

Sizes (`SIZES`): `tiny` (the default: ~0.4 MB, every iteration is SGLang's host overhead) and
`cpu-bench` (~200 MB fp32, same tokenizer: a CPU iteration is dominated by the model's matmuls,
what benchmark/sim_to_real needs to check the simulator's scheduling against real SGLang).

    python -m sglang_duet.tiny_model OUT_DIR [--seed S] [--size tiny|cpu-bench]
"""

from __future__ import annotations

import argparse
import fcntl
import inspect
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1  # bump when the recipe changes, so cached copies are rebuilt
MARKER = "sglang_duet_tiny.json"  # written last: a directory holding it is a complete tiny model
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MODEL_CONFIG = dict(
    vocab_size=2048,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=4096,
    tie_word_embeddings=True,
    initializer_range=0.2,
    rope_theta=10000.0,
)
# Same tokenizer and layout, 4 layers of hidden 1024 / MLP 3072 (50M parameters, 200 MB fp32):
# a 2-core CPU decode step streams the weights (~20 ms) and a 256-token prefill is ~25 GFLOP,
# both well above SGLang's per-iteration host time. Default init std (0.02): not an oracle.
SIZES: dict[str, dict] = {
    "tiny": MODEL_CONFIG,
    "cpu-bench": dict(MODEL_CONFIG, hidden_size=1024, intermediate_size=3072,
                      num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=4,
                      head_dim=64, initializer_range=0.02),
}


def _corpus() -> list[str]:
    """Fixed training text: sources of a few stdlib modules (stable for one Python build)."""
    import argparse as m1
    import json.decoder as m2
    import string as m3
    import textwrap as m4

    return [inspect.getsource(m) for m in (m1, m2, m3, m4)]


def build_tokenizer(out_dir: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=MODEL_CONFIG["vocab_size"],
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out_dir))


def _size_config(size: str) -> dict:
    try:
        return SIZES[size]
    except KeyError:
        raise ValueError(f"unknown model size {size!r}; choices: {', '.join(SIZES)}") from None


def build_model(out_dir: Path, seed: int, size: str = "tiny") -> None:
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    eos_id = SPECIAL_TOKENS.index("<|endoftext|>")
    cfg = Qwen3Config(**_size_config(size), bos_token_id=eos_id, eos_token_id=eos_id,
                      torch_dtype="float32")
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(cfg).to(torch.float32)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    GenerationConfig(bos_token_id=eos_id, eos_token_id=eos_id, do_sample=False).save_pretrained(
        str(out_dir)
    )


def write_tiny_model(out_dir: str | os.PathLike, seed: int = 0, size: str = "tiny") -> Path:
    """Write the model of `size` and the tokenizer to `out_dir` (deterministic for a seed)."""
    _size_config(size)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    build_model(out, seed, size)
    meta = {"format_version": FORMAT_VERSION, "seed": seed}
    if size != "tiny":
        meta["size"] = size
    (out / MARKER).write_text(json.dumps(meta) + "\n")
    return out


def is_tiny_model(path: str | os.PathLike | None) -> bool:
    """Whether `path` is a directory written by `write_tiny_model` (any seed, any location)."""
    return bool(path) and (Path(path) / MARKER).is_file()


def cache_dir() -> Path:
    root = os.environ.get("SGLANG_DUET_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sglang_duet"
    )
    return Path(root)


def default_model_path(seed: int = 0, size: str = "tiny") -> Path:
    """Build once (under a file lock), then reuse, the embedded model in the cache directory."""
    _size_config(size)
    prefix = "tiny-qwen3" if size == "tiny" else f"qwen3-{size}"
    target = cache_dir() / f"{prefix}-v{FORMAT_VERSION}-s{seed}"
    marker = target / MARKER
    if marker.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return target
        logger.info("building the embedded tiny model in %s (once)", target)
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        try:
            write_tiny_model(tmp, seed, size)
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m sglang_duet.tiny_model", description=__doc__)
    p.add_argument("out_dir")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--size", choices=list(SIZES), default="tiny")
    args = p.parse_args(argv)
    path = write_tiny_model(args.out_dir, args.seed, args.size)
    print(path)


if __name__ == "__main__":
    main()
