from __future__ import annotations

import json

import pytest

from sglang_duet.latency import MODELS, ModelSpec, get_model

QWEN3_8B_CONFIG = {  # Qwen/Qwen3-8B config.json (abridged)
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


class TestFromHfConfig:
    def test_dict_matches_builtin(self):
        spec = ModelSpec.from_hf_config(QWEN3_8B_CONFIG, name="qwen3-8b")
        assert spec == MODELS["qwen3-8b"]

    def test_file_and_directory(self, tmp_path):
        (tmp_path / "config.json").write_text(json.dumps(QWEN3_8B_CONFIG))
        a = ModelSpec.from_hf_config(tmp_path, tp=2)
        b = ModelSpec.from_hf_config(tmp_path / "config.json", tp=2)
        assert a == b and a.tp == 2 and a.heads_per_gpu == 16

    def test_llama_defaults(self):
        cfg = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
               "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
               "vocab_size": 128256, "torch_dtype": "bfloat16"}
        spec = ModelSpec.from_hf_config(cfg, name="llama-3.1-8b")
        assert spec == MODELS["llama-3.1-8b"]
        assert spec.head_dim == 128 and not spec.qk_norm and not spec.tie_embeddings

    def test_rejects_moe(self):
        with pytest.raises(ValueError, match="dense"):
            ModelSpec.from_hf_config({**QWEN3_8B_CONFIG, "model_type": "qwen3_moe",
                                      "num_experts": 128})

    def test_missing_key(self):
        cfg = dict(QWEN3_8B_CONFIG)
        del cfg["hidden_size"]
        with pytest.raises(ValueError, match="hidden_size"):
            ModelSpec.from_hf_config(cfg)


class TestSizes:
    def test_qwen3_8b_weights(self):
        m = get_model("qwen3-8b")
        # 36 x 192,946,432 layer params + 4096 final norm + 2 x 151936 x 4096 (embed, LM head)
        assert m.weight_bytes == 2 * (36 * 192_946_432 + 4096 + 2 * 151936 * 4096)
        assert m.kv_bytes_per_token == 2 * 36 * 8 * 128 * 2  # 147,456 B

    def test_tp_sharding(self):
        m1, m2 = get_model("qwen3-14b"), get_model("qwen3-14b", tp=2)
        assert (m2.heads_per_gpu, m2.kv_heads_per_gpu, m2.intermediate_per_gpu) == (20, 4, 8704)
        assert m2.kv_bytes_per_token * 2 == m1.kv_bytes_per_token
        assert m2.weight_bytes < 0.51 * m1.weight_bytes

    def test_kv_heads_replicate_beyond_their_count(self):
        m = get_model("qwen3-8b", tp=16)
        assert m.kv_heads_per_gpu == 1 and m.heads_per_gpu == 2

    def test_bad_tp(self):
        with pytest.raises(ValueError):
            get_model("qwen3-8b", tp=3)

    def test_unknown_name(self):
        with pytest.raises(ValueError, match="qwen3-8b"):
            get_model("qwen3-9b")
