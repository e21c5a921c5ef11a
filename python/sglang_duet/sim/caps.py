"""Running-request caps and CUDA-graph batch caps: each system's defaults, and what happens above.

SGLang 0.5.17 (the wheel's sources):

* ``max_running_requests`` defaults to ``min(max(min(int(tokens / context_len * 512), 4096),
  2048), tokens // 2)`` for a KV pool of ``tokens`` (`srt/mem_cache/kv_cache_configurator.py`,
  `KVCacheConfigurator.resolve_max_num_reqs`). At the cap the scheduler forms no prefill batch
  (`srt/managers/scheduler.py`, `Scheduler.get_new_batch_prefill`: ``get_num_allocatable_reqs
  (running_bs) <= 0`` sets ``batch_is_full``): new requests wait.
* decode batches replay CUDA graphs up to ``cuda_graph_config.decode.max_bs``: 256 at TP < 4 and
  512 at TP >= 4 on 60-160 GiB GPUs (H100, A100-80G, H200; `srt/server_args.py`,
  `ServerArgs._handle_gpu_memory_settings`). A larger batch runs eager
  (`srt/model_executor/runner/decode_cuda_graph_runner.py`, `can_run_graph`: ``cuda_graph_bs
  <= self.max_bs``) and pays a layer-by-layer launch instead of one replay.

vLLM V1 (vllm-project/vllm, `vllm/engine/arg_utils.py` and `vllm/config/vllm.py`):

* ``max_num_seqs`` defaults to 1024 on GPUs with >= 70 GiB whose name has no "a100", else 256
  (`EngineArgs.get_batch_defaults`, OpenAI server), then ``min(max_num_seqs,
  max_num_batched_tokens)`` (`EngineArgs._set_default_max_num_seqs_and_batched_tokens_args`);
  the scheduler runs at most that many requests, the rest wait.
* CUDA graphs are captured up to ``min(max_num_seqs * 2, 512, max_num_batched_tokens)``
  (`VllmConfig._set_cudagraph_sizes`); a larger decode batch runs without a full graph.

The simulator applies the caps to every policy alike: at most ``max_running`` requests are
prefilling or running on a replica, and a decode-only iteration of more than ``graph_max_bs``
requests pays the eager launch (`Executor`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sglang_duet.latency import HardwareSpec

__all__ = ["CONTEXT_LEN", "Caps", "sglang_graph_max_bs", "sglang_max_running", "system_caps"]

GIB = 1 << 30
# Hugging Face config.json max_position_embeddings (the context_len SGLang serves by default).
CONTEXT_LEN = {"qwen3-8b": 40960, "qwen3-14b": 40960, "llama-3.1-8b": 131072,
               "llama-3.1-70b": 131072}
DEFAULT_CONTEXT_LEN = 131072


@dataclass(frozen=True)
class Caps:
    """Requests a replica may hold (prefilling + running) and the largest graph-replayed
    decode batch."""

    max_running: int
    graph_max_bs: int

    def __post_init__(self) -> None:
        if self.max_running < 1 or self.graph_max_bs < 1:
            raise ValueError(f"caps must be >= 1, got {self}")


def sglang_max_running(tokens: int, context_len: int) -> int:
    """SGLang's default max_running_requests for a KV pool of `tokens`."""
    estimated = max(min(int(tokens / context_len * 512), 4096), 2048)
    return max(1, min(estimated, tokens // 2))


def system_caps(flavor: str, hw: HardwareSpec, model_name: str, tp: int, pool_tokens: int,
                token_budget: int) -> Caps:
    """The defaults of `flavor` ('sglang' or 'vllm') for one replica."""
    if flavor == "vllm":
        big = hw.hbm_bytes >= 70 * GIB and "a100" not in hw.name
        seqs = min(1024 if big else 256, token_budget)
        return Caps(seqs, max(1, min(seqs * 2, 512, token_budget)))
    ctx = CONTEXT_LEN.get(model_name, DEFAULT_CONTEXT_LEN)
    return Caps(sglang_max_running(pool_tokens, ctx), sglang_graph_max_bs(tp))


def sglang_graph_max_bs(tp: int) -> int:
    """SGLang's decode CUDA-graph cap on a 60-160 GiB GPU (the module docstring); also the
    batch each of duet's partition captures covers (its memory, `partition.plan`)."""
    return 256 if tp < 4 else 512
