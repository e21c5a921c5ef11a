"""Per-operator-class efficiency factors: the one documented place for the model's defaults."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

CALIBRATION_DIR = Path(__file__).resolve().parent / "calibrations"

# Operator classes; each has a compute efficiency (fraction of `HardwareSpec.compute(S)`) and a
# bandwidth efficiency (fraction of `HardwareSpec.bandwidth(S)`).
CLASSES = ("gemm", "elementwise", "attn_prefill", "attn_decode")
HOST_FIELDS = ("iteration_overhead_s", "launch_layer_s", "graph_replay_s", "join_s",
               "request_overhead_s")


@dataclass(frozen=True)
class Calibration:
    """Efficiency factors in (0, 1], an all-reduce latency and an optional bandwidth curve.

    An operator of class K takes ``max(F / (compute(S) * K_compute), B / (bandwidth(S) * K_bw))``.

    The defaults are typical measured utilisation on Hopper-class GPUs, taken from vendor and
    kernel-library benchmarks, not fitted to any test in this repository:
    - gemm_compute 0.75: cuBLAS bf16 GEMMs with thousands of rows sustain ~700-800 of H100's 989
      TFLOP/s (NVIDIA's H100 GEMM throughput plots; the paper's Fig. 1a knee at ~8K tokens).
    - gemm_bw 0.85: skinny (decode) GEMMs stream weights at ~80-90% of peak HBM bandwidth.
    - elementwise_compute 0.065: norms, RoPE and activations run on CUDA cores (FP32), whose
      peak is ~6.5-7% of the dense bf16 tensor rate (H100 SXM: 67 of 989 TFLOP/s; A100: 19.5 of
      312); bandwidth-bound in practice.
    - elementwise_bw 0.80: fused add+RMSNorm / SiLU-and-mul kernels reach ~80% of peak.
    - attn_prefill_compute 0.45: FlashAttention-2-class prefill kernels (FlashInfer, FA2 on
      Hopper) reach ~350-500 TFLOP/s causal at head dim 128 (FA3 paper's FA2 baselines ~35-50% of
      peak; FA3 itself up to ~75%).
    - attn_decode_bw 0.60: paged decode attention at small batch (few CTAs per request x KV head,
      split-KV reduction, page-size-1 gathers) sustains about 50-70% of peak HBM bandwidth in
      FlashInfer's and vLLM's published kernel benchmarks; large batches do better.
    - attn_prefill_bw 0.60: rarely binding; a chunk attending a long cached prefix reads the
      same paged KV as a decode does, so it gets the decode kernel's bandwidth efficiency.
    - attn_decode_compute 0.50: rarely binding (GQA decode does ~4 FLOP per KV byte).
    Monotonicity across the decode/prefill kernel boundary (q = 1 -> 2 never faster) holds when
    attn_prefill_bw <= attn_decode_bw and attn_prefill_compute <= 2 * attn_decode_compute.
    - link 0.80: NCCL ring all-reduce bus bandwidth on NVLink reaches ~80% of the link rate.
    - allreduce_latency_s 10 us: NCCL small-message all-reduce latency within one NVLink node.
    Host overhead (`reference.host_seconds`), from published figures, not fitted here:
    - iteration_overhead_s 1.8 ms: what a serving loop adds to each CPU-scheduled pass
      (schedule, prepare inputs, sample, sync, stream). Single-stream bf16 8B decode on an H100
      SXM is 7.0-7.4 ms per token in SGLang 0.5.3 / vLLM 0.6-0.11 servers (gpustack performance
      lab, qwen3-8b/h100-latency.md; LambdaLabsML/vllm-benchmark; rows gs-01..05, lam-02 of
      benchmark/latency_model/published) against 5.1 ms for the same step replayed as a CUDA
      graph outside a server (cloudai.pt, "CUDA Graphs + torch.compile: 1.65x LLM decode
      speedup", Llama-3.1-8B, H100 SXM5). vLLM's v0.6.0 profile (blog.vllm.ai 2024-09-05) puts
      62% of a v0.5.3 step of Llama-3-8B on one H100 in the API server and the scheduler.
    - launch_layer_s 100 us: eager launches of one layer's ~10 kernels. The same source's eager
      step is 8.4 ms against 5.1 ms replayed: 3.3 ms over 32 layers. Mixed and prefill passes
      run eager in SGLang (CUDA graphs cover decode batches).
    - graph_replay_s 20 us: one cudaGraphLaunch of a captured decode pass (a launch costs
      ~4-6 us of CPU, susun-blog.com "pegainfer (3)"; the graph's per-node submission is
      extra).
    - join_s 20 us: a spatial iteration's fork and join of two streams (event record and wait
      on each side, a few launch latencies).
    - request_overhead_s 0: CPU work per sampled token (sampling, stop check, detokenize); no
      published per-request figure was found, so only a fit sets it.
    - bw_knee / bw_hill None: keep the hardware profile's bandwidth curve.
    """

    name: str = "default"
    gemm_compute: float = 0.75
    gemm_bw: float = 0.85
    elementwise_compute: float = 0.065
    elementwise_bw: float = 0.80
    attn_prefill_compute: float = 0.45
    attn_prefill_bw: float = 0.60
    attn_decode_compute: float = 0.50
    attn_decode_bw: float = 0.60
    link: float = 0.80
    allreduce_latency_s: float = 10e-6
    iteration_overhead_s: float = 1.8e-3  # CPU per scheduled pass: schedule, sample, sync
    launch_layer_s: float = 100e-6  # eager kernel launches of one layer
    graph_replay_s: float = 20e-6  # one CUDA-graph replay (a decode pass)
    join_s: float = 20e-6  # fork/join of the two phases' streams in a spatial iteration
    request_overhead_s: float = 0.0  # CPU per sampling row and pass: sample, stop, detokenize
    bw_knee: float | None = None
    bw_hill: float | None = None
    # provenance of a fitted calibration (informational)
    hardware: str | None = None
    n_samples: int = 0
    heldout_mape: float | None = None
    heldout_p90: float | None = None

    def __post_init__(self) -> None:
        for key in self.efficiency_names():
            v = getattr(self, key)
            if not (0.0 < v <= 2.0):
                raise ValueError(f"calibration {self.name!r}: {key}={v} outside (0, 2]")
        if min(self.allreduce_latency_s, self.iteration_overhead_s, self.launch_layer_s,
               self.graph_replay_s, self.join_s, self.request_overhead_s) < 0:
            raise ValueError(f"calibration {self.name!r}: latencies must be >= 0")
        if (self.bw_knee is None) != (self.bw_hill is None):
            raise ValueError("bw_knee and bw_hill go together")

    @staticmethod
    def efficiency_names() -> tuple[str, ...]:
        return tuple(f"{k}_{part}" for k in CLASSES for part in ("compute", "bw")) + ("link",)

    def efficiency(self, cls: str) -> tuple[float, float]:
        """(compute, bandwidth) efficiency of an operator class."""
        return getattr(self, f"{cls}_compute"), getattr(self, f"{cls}_bw")

    def without_host(self) -> Calibration:
        """The same device model with no host overhead: for kernels timed on their own streams
        (microbenchmarks), where no serving loop runs."""
        return replace(self, **dict.fromkeys(HOST_FIELDS, 0.0))

    # --- persistence ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown calibration keys: {', '.join(unknown)}")
        return cls(**data)

    def save(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, name_or_path: str | os.PathLike, search_dir: str | os.PathLike | None = None
             ) -> Calibration:
        """Load a calibration JSON by path, or by name from `search_dir` (default:
        `sglang_duet/latency/calibrations/NAME.json`). The name "default" is built in."""
        raw = os.fspath(name_or_path)
        path = Path(raw)
        if not path.is_file():
            directory = Path(search_dir) if search_dir is not None else CALIBRATION_DIR
            candidate = directory / f"{raw}.json"
            if candidate.is_file():
                path = candidate
            elif raw == "default":
                return cls()
            else:
                names = ", ".join(["default", *available(directory)])
                raise ValueError(f"no calibration {raw!r} (a JSON path, or one of: {names})")
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))


def available(directory: str | os.PathLike | None = None) -> list[str]:
    """Names of the calibrations stored in `directory` (default: the package's data dir)."""
    d = Path(directory) if directory is not None else CALIBRATION_DIR
    return sorted(p.stem for p in d.glob("*.json")) if d.is_dir() else []
