"""One TP rank of `test_patches_tp.py`: SGLang's own TP=2 groups over gloo (127.0.0.1), with the
prefill group PD-multiplexing builds, and the collectives a dense (Qwen3/Llama) forward issues,
run outside and inside `patches.prefill_tp_group`. Prints one JSON line: for each phase, the
group every collective named and the group every getter resolved to.

Run as ``python tp2_collectives.py RANK PORT`` (two processes, one per rank).
"""

from __future__ import annotations

import json
import os
import sys

os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the CPU build of SGLang's groups (no NCCL)

import torch  # noqa: E402

from sglang_duet.runtime import patches  # noqa: E402

# GroupCoordinator methods a forward can reach (dense layers, logits, DP-attention helpers).
METHODS = ("all_reduce", "quant_all_reduce", "fused_allreduce_rmsnorm", "reduce_scatter_tensor",
           "reduce_scatterv", "all_gather_into_tensor", "all_gather", "all_gatherv", "gather",
           "broadcast")


def main(rank: int, port: int) -> None:
    patches.patch_tp_groups_for_cpu()
    import sglang.srt.distributed.parallel_state as ps
    from sglang.srt.distributed import communication_op as ops

    ps.init_distributed_environment(world_size=2, rank=rank, local_rank=rank, backend="gloo",
                                    distributed_init_method=f"tcp://127.0.0.1:{port}",
                                    timeout=60)
    ps.initialize_model_parallel(tensor_model_parallel_size=2, duplicate_tp_group=True)
    names = {id(ps._TP): "decode", id(ps._PDMUX_PREFILL_TP_GROUP): "prefill"}
    names.update({id(ps._TP.device_group): "decode", id(ps._TP.cpu_group): "decode",
                  id(ps._PDMUX_PREFILL_TP_GROUP.device_group): "prefill"})
    named: list[str] = []
    depth: list[str] = []  # the GroupCoordinator methods running (their own calls not counted)
    _record(ps.GroupCoordinator, names, named, depth)
    _record_torch(names, named, depth)

    runner = _runner(ps, names)
    out = {}
    for phase, enabled in (("outside", False), ("inside", True), ("after", False)):
        named.clear()
        with patches.prefill_tp_group(enabled, runner):
            getters = _getters(ps, runner)
            _forward_collectives(ops, runner)
        out[phase] = {"collectives": list(named),
                      "getters": {k: names.get(id(v), "other") for k, v in getters.items()}}
    print(json.dumps(out), flush=True)
    ps.destroy_model_parallel()
    torch.distributed.destroy_process_group()


def _record(cls, names: dict, named: list, depth: list) -> None:
    for method in METHODS:
        original = getattr(cls, method)

        def wrapper(self, *args, _original=original, _method=method, **kwargs):
            if not depth:
                named.append(f"{_method}:{names.get(id(self), self.unique_name)}")
            depth.append(_method)
            try:
                return _original(self, *args, **kwargs)
            finally:
                depth.pop()

        setattr(cls, method, wrapper)


def _record_torch(names: dict, named: list, depth: list) -> None:
    """torch.distributed calls made outside a GroupCoordinator method, on a group SGLang keeps
    (the sampler's token-id sync)."""
    original = torch.distributed.all_reduce

    def all_reduce(tensor, *args, group=None, **kwargs):
        if not depth:
            named.append(f"dist.all_reduce:{names.get(id(group), 'other')}")
        return original(tensor, *args, group=group, **kwargs)

    torch.distributed.all_reduce = all_reduce


def _runner(ps, names: dict):
    """A model runner as `prefill_tp_group` sees it: SGLang's sampler (its cached token-sync
    group) and a model holding SGLang's logits gatherer (multimem, built for the TP group)."""
    from types import SimpleNamespace as NS

    from sglang.srt.distributed.device_communicators import triton_symm_mem_ag

    sampler = NS(tp_sync_group=ps.get_tp_group().device_group)
    head = torch.nn.Module()
    # enabled=False: no multimem on the CPU (its symmetric buffer is what the decode owns on a
    # GPU); the prefill must not call this object at all
    head._logits_gatherer = triton_symm_mem_ag.MultimemAllGatherer(max_tokens=128, enabled=False)
    names[id(head._logits_gatherer)] = "decode"
    model = torch.nn.Sequential(head)
    return NS(sampler=sampler, model=model)


def _getters(ps, runner) -> dict:
    from sglang.srt.runtime_context import get_parallel

    par = get_parallel()
    return {
        "get_tp_group": ps.get_tp_group(), "get_attn_tp_group": ps.get_attn_tp_group(),
        "get_attn_cp_group": ps.get_attn_cp_group(), "get_moe_dp_group": ps.get_moe_dp_group(),
        "get_moe_ep_group": ps.get_moe_ep_group(), "get_moe_tp_group": ps.get_moe_tp_group(),
        "parallel.tp_group": par.tp_group, "parallel.attn_tp_group": par.attn_tp_group,
        "parallel.attn_cp_group": par.attn_cp_group, "parallel.moe_tp_group": par.moe_tp_group,
        "sampler.tp_sync_group": runner.sampler.tp_sync_group,
        "logits_processor._logits_gatherer": runner.model[0]._logits_gatherer,
    }


def _forward_collectives(ops, runner) -> None:
    """The collectives of a dense TP forward, by the function SGLang's layers call:
    VocabParallelEmbedding and RowParallelLinear(reduce_results) ->
    tensor_model_parallel_all_reduce; LayerCommunicator's attention reduce ->
    attention_tensor_model_parallel_all_reduce; LogitsProcessor -> its `_logits_gatherer`;
    Sampler -> torch.distributed.all_reduce on its `tp_sync_group`; the DP-attention helpers
    (`layers/dp_attention.py`) over the attention TP group."""
    from sglang.srt.layers import dp_attention as dpa

    x = torch.ones(4, 8)
    ops.tensor_model_parallel_all_reduce(x.clone())
    ops.attention_tensor_model_parallel_all_reduce(x.clone())
    ops.tensor_model_parallel_all_gather(x.clone(), dim=-1)
    dpa.attn_tp_all_reduce(x.clone())
    for module in runner.model.modules():
        if hasattr(module, "_logits_gatherer"):
            module._logits_gatherer(x.clone().to(torch.bfloat16))
    torch.distributed.all_reduce(torch.ones(2, dtype=torch.int64),
                                 op=torch.distributed.ReduceOp.MIN,
                                 group=runner.sampler.tp_sync_group)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
