"""FLOPs and HBM bytes of every operator of one decoder layer, per GPU (the model's inventory).

Token-level operators are linear in the batch's total tokens T: ``F = f*T``, ``B = b*T + w``
(w: weight bytes, read once per iteration). Attention depends on each request's (q, c); see
`AttentionCoeffs`. Communication is NVLink traffic, not HBM traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import ModelSpec


@dataclass(frozen=True)
class TokenOp:
    """A token-level operator: FLOPs ``f*T``, HBM bytes ``b*T + w`` for T rows."""

    name: str
    cls: str  # "gemm" or "elementwise"
    f: float  # FLOP per token
    b: float  # activation bytes per token (read + write)
    w: float  # weight bytes (independent of T)

    def flops(self, tokens: float) -> float:
        return self.f * tokens

    def bytes(self, tokens: float) -> float:
        return self.b * tokens + self.w if tokens > 0 else 0.0


def _linear(name: str, k: int, n: int, db: int) -> TokenOp:
    """y[T, n] = x[T, k] @ W[k, n]: 2kn FLOP per row; reads x and W, writes y."""
    return TokenOp(name, "gemm", 2.0 * k * n, float(db * (k + n)), float(db * k * n))


def _rmsnorm(name: str, width: int, db: int, fused_residual: bool) -> TokenOp:
    """RMSNorm over `width`: square, sum, scale, weight (4 FLOP/element). With the residual add
    fused (SGLang's fused_add_rmsnorm) it reads x and the residual and writes both back."""
    moved = 4 if fused_residual else 2
    return TokenOp(name, "elementwise", 4.0 * width, float(db * moved * width), float(db * width))


def layer_token_ops(m: ModelSpec) -> tuple[TokenOp, ...]:
    """Token-level operators of one layer on one GPU, in execution order."""
    h, d, db = m.hidden, m.head_dim, m.dtype_bytes
    nq, nk, inter = m.heads_per_gpu, m.kv_heads_per_gpu, m.intermediate_per_gpu
    qk = (nq + nk) * d  # elements of q and k per token (normed and rotated)
    ops = [
        _rmsnorm("input_norm", h, db, fused_residual=True),
        _linear("qkv_proj", h, (nq + 2 * nk) * d, db),
    ]
    if m.qk_norm:
        # per-head RMSNorm of q and k; the weight (d elements) is shared by heads, read twice
        ops.append(TokenOp("qk_norm", "elementwise", 4.0 * qk, float(db * 2 * qk), 2.0 * db * d))
    ops += [
        # rotary embedding: x*cos + rot(x)*sin, 3 FLOP per element, read + write q and k
        TokenOp("rope", "elementwise", 3.0 * qk, float(db * 2 * qk), 0.0),
        _linear("o_proj", nq * d, h, db),
        _rmsnorm("post_attn_norm", h, db, fused_residual=True),
        _linear("gate_up_proj", h, 2 * inter, db),
        # silu(gate) * up: ~5 FLOP per output element; reads gate and up, writes the product
        TokenOp("silu_mul", "elementwise", 5.0 * inter, float(db * 3 * inter), 0.0),
        _linear("down_proj", inter, h, db),
    ]
    return tuple(ops)


def lm_head_ops(m: ModelSpec) -> tuple[TokenOp, ...]:
    """Per sampled row: the final RMSNorm and the (vocab-parallel) LM head projection."""
    return (
        _rmsnorm("final_norm", m.hidden, m.dtype_bytes, fused_residual=True),
        _linear("lm_head", m.hidden, m.vocab_per_gpu, m.dtype_bytes),
    )


@dataclass(frozen=True)
class AttentionCoeffs:
    """Attention of one request (q new tokens, c cached) in one layer on one GPU.

    FLOPs: QK^T and PV, 2 FLOP per multiply-add each, per query head and attended key:
    ``flops_per_attended * (q*c + q*(q+1)/2)`` (causal: new token j sees c + j + 1 keys).
    Bytes (the minimum traffic of a fused kernel): read Q and write O (``nq*d`` each per new
    token), write the new tokens' K and V to the cache, read K and V of all c + q keys:
    ``bytes_per_q * q + bytes_per_kv * (c + q)``.
    """

    flops_per_attended: float
    bytes_per_q: float
    bytes_per_kv: float


def attention_coeffs(m: ModelSpec) -> AttentionCoeffs:
    d, db = m.head_dim, m.dtype_bytes
    nq, nk = m.heads_per_gpu, m.kv_heads_per_gpu
    return AttentionCoeffs(
        flops_per_attended=4.0 * nq * d,
        bytes_per_q=float(db * d * (2 * nq + 2 * nk)),
        bytes_per_kv=float(db * d * 2 * nk),
    )


def allreduce_link_bytes(m: ModelSpec, tokens: int) -> float:
    """Bytes each GPU sends per ring all-reduce of the [T, hidden] activations: 2(p-1)/p * size.
    Two all-reduces per layer (after o_proj and after down_proj); zero without TP."""
    if m.tp == 1:
        return 0.0
    return 2.0 * (m.tp - 1) / m.tp * tokens * m.hidden * m.dtype_bytes


def logits_gather_link_bytes(m: ModelSpec, rows: int) -> float:
    """Bytes each GPU receives when gathering vocab-parallel fp32 logits of the sampled rows."""
    if m.tp == 1:
        return 0.0
    return (m.tp - 1) / m.tp * rows * m.vocab_per_gpu * m.tp * 4.0
