"""Dense decoder model shapes (Qwen3, Qwen2, Llama) and their tensor-parallel sharding."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from typing import Any

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4, "float8": 1}
_DENSE_TYPES = ("qwen3", "qwen2", "llama", "mistral")
_MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")


@dataclass(frozen=True)
class ModelSpec:
    """Shape of a dense decoder, sharded over `tp` GPUs the way SGLang shards it.

    Per-GPU quantities: attention heads and the MLP's intermediate size are split by `tp`; KV
    heads too while there are at least `tp` of them, otherwise each GPU holds one replica; the
    vocabulary (embedding and LM head) is split with padding. Norm weights are replicated.
    """

    name: str
    num_layers: int
    hidden: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tie_embeddings: bool = False
    dtype_bytes: int = 2
    qk_norm: bool = False  # Qwen3 normalises q and k per head before RoPE
    tp: int = 1

    def __post_init__(self) -> None:
        dims = (self.num_layers, self.hidden, self.num_heads, self.num_kv_heads, self.head_dim)
        if min(dims + (self.intermediate, self.vocab, self.dtype_bytes, self.tp)) <= 0:
            raise ValueError(f"{self.name}: every dimension must be positive")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"{self.name}: heads {self.num_heads} not a multiple of KV heads")
        if self.num_heads % self.tp:
            raise ValueError(f"{self.name}: {self.num_heads} heads do not split over tp={self.tp}")
        if self.num_kv_heads >= self.tp and self.num_kv_heads % self.tp:
            raise ValueError(f"{self.name}: {self.num_kv_heads} KV heads over tp={self.tp}")
        if self.intermediate % self.tp:
            raise ValueError(f"{self.name}: intermediate {self.intermediate} over tp={self.tp}")

    # --- per-GPU shard -------------------------------------------------------------------------
    @property
    def heads_per_gpu(self) -> int:
        return self.num_heads // self.tp

    @property
    def kv_heads_per_gpu(self) -> int:
        return max(1, self.num_kv_heads // self.tp)

    @property
    def intermediate_per_gpu(self) -> int:
        return self.intermediate // self.tp

    @property
    def vocab_per_gpu(self) -> int:
        return -(-self.vocab // self.tp)

    @property
    def layer_params(self) -> int:
        """Parameters of one decoder layer on one GPU (projections, MLP, norms)."""
        d, h = self.head_dim, self.hidden
        qkv = h * (self.heads_per_gpu + 2 * self.kv_heads_per_gpu) * d
        o = self.heads_per_gpu * d * h
        mlp = 3 * h * self.intermediate_per_gpu
        norms = 2 * h + (2 * d if self.qk_norm else 0)
        return qkv + o + mlp + norms

    @property
    def weight_bytes(self) -> int:
        """Bytes of weights on one GPU: layers, final norm, embedding and (untied) LM head."""
        emb = self.vocab_per_gpu * self.hidden
        head = 0 if self.tie_embeddings else emb
        params = self.num_layers * self.layer_params + self.hidden + emb + head
        return params * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token occupies on one GPU, all layers (K and V)."""
        return 2 * self.num_layers * self.kv_heads_per_gpu * self.head_dim * self.dtype_bytes

    def sharded(self, tp: int) -> ModelSpec:
        return replace(self, tp=tp)

    # --- construction --------------------------------------------------------------------------
    @classmethod
    def from_hf_config(cls, path_or_dict: str | os.PathLike | dict[str, Any], tp: int = 1,
                       name: str | None = None) -> ModelSpec:
        """Read a Hugging Face `config.json` (dict, file, or model directory)."""
        if isinstance(path_or_dict, dict):
            cfg = path_or_dict
            default_name = str(cfg.get("_name_or_path") or cfg.get("model_type") or "model")
        else:
            path = os.fspath(path_or_dict)
            if os.path.isdir(path):
                path = os.path.join(path, "config.json")
            with open(path, encoding="utf-8") as f:
                cfg = json.load(f)
            default_name = os.path.basename(os.path.dirname(os.path.abspath(path)))
        if "text_config" in cfg and "hidden_size" not in cfg:
            cfg = cfg["text_config"]
        model_type = str(cfg.get("model_type", "")).lower()
        if any(k in cfg for k in _MOE_KEYS) or model_type not in _DENSE_TYPES:
            raise ValueError(
                f"only dense decoders are supported ({', '.join(_DENSE_TYPES)}); "
                f"got model_type={model_type!r}"
            )
        try:
            heads = int(cfg["num_attention_heads"])
            hidden = int(cfg["hidden_size"])
            dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
            return cls(
                name=name or default_name,
                num_layers=int(cfg["num_hidden_layers"]),
                hidden=hidden,
                num_heads=heads,
                num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
                head_dim=int(cfg.get("head_dim") or hidden // heads),
                intermediate=int(cfg["intermediate_size"]),
                vocab=int(cfg["vocab_size"]),
                tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                dtype_bytes=_DTYPE_BYTES[dtype.replace("torch.", "")],
                qk_norm=model_type == "qwen3",
                tp=tp,
            )
        except KeyError as e:
            raise ValueError(f"config lacks or has an unknown value for {e}") from None


# Public config.json numbers of the built-in models (Hugging Face hub, bf16 checkpoints).
MODELS: dict[str, ModelSpec] = {
    # Qwen/Qwen3-8B: 36 layers, hidden 4096, 32 q heads / 8 KV heads of 128, MLP 12288,
    # vocab 151936, untied embeddings.
    "qwen3-8b": ModelSpec("qwen3-8b", 36, 4096, 32, 8, 128, 12288, 151936, False, 2, True),
    # Qwen/Qwen3-14B: 40 layers, hidden 5120, 40 q heads / 8 KV heads of 128, MLP 17408.
    "qwen3-14b": ModelSpec("qwen3-14b", 40, 5120, 40, 8, 128, 17408, 151936, False, 2, True),
    # meta-llama/Llama-3.1-8B: 32 layers, hidden 4096, 32 q / 8 KV heads (head dim 4096/32 =
    # 128), MLP 14336, vocab 128256, untied embeddings.
    "llama-3.1-8b": ModelSpec("llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256, False, 2),
    # meta-llama/Llama-3.1-70B: 80 layers, hidden 8192, 64 q / 8 KV heads of 128, MLP 28672,
    # vocab 128256, untied embeddings.
    "llama-3.1-70b": ModelSpec("llama-3.1-70b", 80, 8192, 64, 8, 128, 28672, 128256, False, 2),
}


def get_model(name: str, tp: int = 1) -> ModelSpec:
    """Built-in model by name, sharded over `tp`; ValueError naming the accepted names."""
    try:
        spec = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; accepted: {', '.join(sorted(MODELS))}") from None
    return spec.sharded(tp)


def resolve_model(name: str | ModelSpec, tp: int) -> ModelSpec:
    """A shape, a built-in model name, or a path to a Hugging Face config / model directory."""
    if isinstance(name, ModelSpec):
        return name.sharded(tp)
    if name in MODELS or not os.path.exists(name):
        return get_model(name, tp)
    return ModelSpec.from_hf_config(name, tp=tp)
