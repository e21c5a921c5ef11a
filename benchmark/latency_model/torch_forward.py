"""A torch-only dense decoder forward with random weights, timed per batch (for profile_gpu.py).

Shapes come from a `ModelSpec` (one GPU's shard). Each forward runs every layer over the batch's
tokens, attention per group of identical (q, c) requests through scaled_dot_product_attention,
and the LM head on each request's last row. Works on CPU too (tiny shapes, for tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from sglang_duet.latency import Batch, ModelSpec

try:  # bottom-right aligned causal mask: new tokens see the whole cached prefix
    from torch.nn.attention.bias import causal_lower_right
except ImportError:  # pragma: no cover - older torch
    causal_lower_right = None

EPS = 1e-6


class TorchRunner:
    def __init__(self, model: ModelSpec, seed: int = 0, cuda_graph: bool = True,
                 device: str | None = None, dtype: torch.dtype = torch.bfloat16,
                 max_position: int = 65536) -> None:
        if device is None:
            if not torch.cuda.is_available():
                raise SystemExit("no CUDA device; use --dry-run to exercise the CSV path")
            device = "cuda"
        self.device = torch.device(device)
        self.dtype = dtype
        self.model = model
        self.cuda_graph = cuda_graph and self.device.type == "cuda"
        self.device_name = (torch.cuda.get_device_name(self.device)
                            if self.device.type == "cuda" else "cpu")
        torch.manual_seed(seed)
        m = model
        h, d = m.hidden, m.head_dim
        nq, nk, inter = m.heads_per_gpu, m.kv_heads_per_gpu, m.intermediate_per_gpu

        def w(out_f: int, in_f: int) -> torch.Tensor:
            return torch.randn(out_f, in_f, device=self.device, dtype=dtype) * 0.02

        def ones(n: int) -> torch.Tensor:
            return torch.ones(n, device=self.device, dtype=dtype)

        self.layers = [
            {"in_norm": ones(h), "qkv": w((nq + 2 * nk) * d, h), "q_norm": ones(d),
             "k_norm": ones(d), "o": w(h, nq * d), "post_norm": ones(h),
             "gate_up": w(2 * inter, h), "down": w(h, inter)}
            for _ in range(m.num_layers)
        ]
        self.final_norm = ones(h)
        self.lm_head = w(m.vocab_per_gpu, h)
        inv = 1.0 / (1e6 ** (torch.arange(0, d, 2, device=self.device).float() / d))
        ang = torch.outer(torch.arange(max_position, device=self.device).float(), inv)
        self.cos, self.sin = ang.cos().to(dtype), ang.sin().to(dtype)
        self._streams: dict[int, object] = {}
        self._backend = None
        self.native_gqa = self._probe_flash_gqa()
        self.sdpa_note = ("SDPA flash with enable_gqa" if self.native_gqa else
                          "SDPA without flash GQA: KV heads expanded before attention")

    def _probe_flash_gqa(self) -> bool:
        """Whether SDPA's FlashAttention backend takes GQA directly (else expand KV heads)."""
        if self.device.type != "cuda":
            return True  # CPU: the math backend handles enable_gqa
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            q = torch.randn(1, 4, 16, 64, device=self.device, dtype=self.dtype)
            kv = torch.randn(1, 2, 16, 64, device=self.device, dtype=self.dtype)
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
            return True
        except Exception:
            return False

    # --- partitions ----------------------------------------------------------------------------
    def partitions(self, sizes: list[int | None]) -> tuple[list[int | None], str]:
        """Sizes this machine can run: the partition sizes when a backend gives per-size streams,
        else the whole device only, with the reason."""
        if self.device.type != "cuda":
            return [None], "cpu: whole device only"
        try:
            from sglang_duet.partition import build_partition_menu

            want = [s for s in sizes if s is not None]
            menu, reason = build_partition_menu("auto", self.device.index or 0)
            if not menu.decode_sizes:
                return [None], f"no SM partition backend ({reason}); whole device only"
            usable = []
            for s in want:  # the menu's nearest size at or above each request
                fit = [d for d in menu.decode_sizes if d >= s]
                if fit:
                    self._streams[fit[0]] = menu.streams(fit[0])[0]  # the decode-side stream
                    usable.append(fit[0])
            self._backend = menu
            return [None, *sorted(set(usable))], f"partitions via {menu.backend} ({reason})"
        except Exception as e:  # optional feature: any failure means whole device only
            return [None], f"partition backend unavailable ({type(e).__name__}: {e})"

    # --- forward -------------------------------------------------------------------------------
    def prepare(self, batch: Batch, stream=None) -> Callable[[], torch.Tensor]:
        """Allocate inputs and KV buffers for `batch`; return a no-argument forward.

        A decode-only batch on CUDA becomes a CUDA graph captured on `stream` (a partition
        stream, or a side stream for the whole device): a graph's kernels run in the context
        they were captured in, so one captured elsewhere would replay on every SM.
        """
        m, dev = self.model, self.device
        pairs = batch.pairs()
        groups: list[tuple[int, int, int]] = []  # (n, q, c), consecutive identical requests
        for q, c in pairs:
            if groups and groups[-1][1:] == (q, c):
                groups[-1] = (groups[-1][0] + 1, q, c)
            else:
                groups.append((1, q, c))
        nk, d = m.kv_heads_per_gpu, m.head_dim
        caches = [[(torch.zeros(n, nk, c + q, d, device=dev, dtype=self.dtype),
                    torch.zeros(n, nk, c + q, d, device=dev, dtype=self.dtype))
                   for n, q, c in groups] for _ in range(m.num_layers)]
        pos = torch.from_numpy(np.concatenate(
            [np.tile(np.arange(c, c + q), n) for n, q, c in groups])).to(dev)
        last = torch.from_numpy(np.cumsum(batch.q) - 1).to(dev)
        x0 = torch.randn(batch.tokens, m.hidden, device=dev, dtype=self.dtype)
        cos, sin = self.cos[pos], self.sin[pos]

        def forward() -> torch.Tensor:
            x = x0
            for layer, cache in zip(self.layers, caches, strict=True):
                x = self._layer(x, layer, cache, groups, cos, sin)
            hid = F.rms_norm(x[last], (m.hidden,), self.final_norm, EPS)
            return F.linear(hid, self.lm_head)

        forward.caches = caches  # type: ignore[attr-defined]  # tests poke the KV buffers
        if not (self.cuda_graph and batch.n_decode == batch.n):
            return forward
        return graphed(forward, stream)

    def _layer(self, x, p, cache, groups, cos, sin):
        m = self.model
        nq, nk, d, inter = m.heads_per_gpu, m.kv_heads_per_gpu, m.head_dim, m.intermediate_per_gpu
        t = x.shape[0]
        res = x
        h = F.rms_norm(x, (m.hidden,), p["in_norm"], EPS)
        qkv = F.linear(h, p["qkv"])
        q = qkv[:, : nq * d].view(t, nq, d)
        k = qkv[:, nq * d : (nq + nk) * d].view(t, nk, d)
        v = qkv[:, (nq + nk) * d :].view(t, nk, d)
        if m.qk_norm:
            q = F.rms_norm(q, (d,), p["q_norm"], EPS)
            k = F.rms_norm(k, (d,), p["k_norm"], EPS)
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        outs = []
        off = 0
        for (n, ql, c), (kc, vc) in zip(groups, cache, strict=True):
            span = slice(off, off + n * ql)
            off += n * ql
            qg = q[span].view(n, ql, nq, d).transpose(1, 2)
            kc[:, :, c : c + ql] = k[span].view(n, ql, nk, d).transpose(1, 2)
            vc[:, :, c : c + ql] = v[span].view(n, ql, nk, d).transpose(1, 2)
            if not self.native_gqa:
                kc, vc = kc.repeat_interleave(nq // nk, 1), vc.repeat_interleave(nq // nk, 1)
            if ql == 1:
                o = F.scaled_dot_product_attention(qg, kc, vc, enable_gqa=True)
            elif c == 0:
                o = F.scaled_dot_product_attention(qg, kc, vc, is_causal=True, enable_gqa=True)
            else:
                o = F.scaled_dot_product_attention(qg, kc, vc, attn_mask=_mask(ql, c + ql, x),
                                                   enable_gqa=True)
            outs.append(o.transpose(1, 2).reshape(n * ql, nq * d))
        attn = outs[0] if len(outs) == 1 else torch.cat(outs)
        x = F.linear(attn, p["o"]) + res
        res = x
        h = F.rms_norm(x, (m.hidden,), p["post_norm"], EPS)
        gu = F.linear(h, p["gate_up"])
        h = F.silu(gu[:, :inter]) * gu[:, inter:]
        return F.linear(h, p["down"]) + res

    # --- timing --------------------------------------------------------------------------------
    def measurer(self, warmup: int, repeats: int) -> Callable[[Batch, int | None], list[float]]:
        timer = _Timer()

        def measure(batch: Batch, sms: int | None) -> list[float]:
            stream = self._streams.get(sms) if sms is not None else None
            fn = self.prepare(batch, stream)
            if self.device.type != "cuda":
                times = []
                for i in range(warmup + repeats):
                    t0 = time.perf_counter()
                    fn()
                    if i >= warmup:
                        times.append(time.perf_counter() - t0)
                return times
            with torch.cuda.stream(stream) if stream is not None else _nullctx():
                for _ in range(warmup):
                    fn()
                times = [timer(fn) for _ in range(repeats)]
            del fn
            torch.cuda.empty_cache()
            return times

        return measure


def graphed(forward: Callable[[], torch.Tensor], stream=None) -> Callable[[], torch.Tensor]:
    """`forward` as the replay of a CUDA graph captured on `stream` (a new side stream when
    None), after a warm-up run there; `forward` itself when capture fails for this shape."""
    side = stream if stream is not None else torch.cuda.Stream()
    try:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            forward()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
            forward()
        return graph.replay
    except Exception:  # capture unsupported for this shape: time it eagerly
        return forward


class _Timer:
    """Seconds of one call on the current stream: CUDA events there, or the host clock around
    a stream sync where events fail (a partition stream of a green context may refuse events
    of the primary context), as concurrent_torch.Clock does."""

    def __init__(self) -> None:
        self.events = True

    def __call__(self, fn: Callable[[], object]) -> float:
        stream = torch.cuda.current_stream()
        if self.events:
            try:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record(stream)
                fn()
                end.record(stream)
                end.synchronize()
                return start.elapsed_time(end) / 1e3
            except RuntimeError:
                self.events = False
        stream.synchronize()
        t0 = time.perf_counter()
        fn()
        stream.synchronize()
        return time.perf_counter() - t0


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def _mask(q_len: int, kv_len: int, like: torch.Tensor):
    if causal_lower_right is not None:
        return causal_lower_right(q_len, kv_len)
    i = torch.arange(q_len, device=like.device)[:, None]
    j = torch.arange(kv_len, device=like.device)[None, :]
    return j <= i + (kv_len - q_len)


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
