"""Operator FLOPs/bytes of one Qwen3-8B layer, against values computed by hand."""

from __future__ import annotations

import pytest

from sglang_duet.latency import get_model
from sglang_duet.latency.ops import attention_coeffs, layer_token_ops, lm_head_ops

T = 1000  # tokens


@pytest.fixture(scope="module")
def ops():
    return {op.name: op for op in layer_token_ops(get_model("qwen3-8b"))}


def test_operator_list(ops):
    assert list(ops) == ["input_norm", "qkv_proj", "qk_norm", "rope", "o_proj", "post_attn_norm",
                         "gate_up_proj", "silu_mul", "down_proj"]


@pytest.mark.parametrize(
    "name, flops, nbytes",
    [
        # qkv: [T,4096] x [4096, (32+8+8)*128 = 6144]
        ("qkv_proj", 2 * T * 4096 * 6144, 2 * (4096 * 6144 + T * 4096 + T * 6144)),
        ("o_proj", 2 * T * 4096 * 4096, 2 * (4096 * 4096 + T * 4096 + T * 4096)),
        # gate and up fused: [4096, 2*12288]
        ("gate_up_proj", 2 * T * 4096 * 24576, 2 * (4096 * 24576 + T * 4096 + T * 24576)),
        ("down_proj", 2 * T * 12288 * 4096, 2 * (12288 * 4096 + T * 12288 + T * 4096)),
        # fused add+RMSNorm: reads x and residual, writes both, reads the 4096 weights
        ("input_norm", 4 * T * 4096, 2 * (4 * T * 4096 + 4096)),
        # q (32 heads) and k (8 heads) of 128: 5120 elements per token
        ("qk_norm", 4 * T * 5120, 2 * (2 * T * 5120 + 2 * 128)),
        ("rope", 3 * T * 5120, 2 * 2 * T * 5120),
        ("silu_mul", 5 * T * 12288, 2 * 3 * T * 12288),
    ],
)
def test_token_op(ops, name, flops, nbytes):
    assert ops[name].flops(T) == flops
    assert ops[name].bytes(T) == nbytes


def test_weights_add_up_to_layer(ops):
    m = get_model("qwen3-8b")
    assert sum(op.w for op in ops.values()) == m.layer_params * m.dtype_bytes


def test_zero_tokens_move_no_bytes(ops):
    assert ops["qkv_proj"].bytes(0) == 0 and ops["qkv_proj"].flops(0) == 0


def test_attention_prefill_8192():
    a = attention_coeffs(get_model("qwen3-8b"))
    q, c = 8192, 0
    attended = q * (q + 1) // 2  # 33,558,528 (causal)
    assert a.flops_per_attended * attended == 549_822_922_752  # 4 * 32 heads * 128 * attended
    # Q read + O write (32 heads), new K,V write, K,V read of 8192 keys (8 heads)
    nbytes = q * 32 * 128 * 2 * 2 + q * 8 * 128 * 2 * 2 + (c + q) * 8 * 128 * 2 * 2
    assert a.bytes_per_q * q + a.bytes_per_kv * (c + q) == nbytes == 201_326_592


def test_attention_decode():
    a = attention_coeffs(get_model("qwen3-8b"))
    c = 1023
    assert a.flops_per_attended * (c + 1) == 16_777_216
    assert a.bytes_per_q + a.bytes_per_kv * (c + 1) == 16384 + 4096 + 1024 * 4096


def test_lm_head():
    head = {op.name: op for op in lm_head_ops(get_model("qwen3-8b"))}
    assert head["lm_head"].flops(3) == 2 * 3 * 4096 * 151936
    assert head["lm_head"].w == 2 * 4096 * 151936
