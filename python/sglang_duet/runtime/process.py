"""Scheduler-process entry: SGLang's run_scheduler_process with DuetScheduler substituted."""

from __future__ import annotations

from typing import Any


def run_duet_scheduler_process(duet_args: dict[str, Any], *args: Any, **kwargs: Any) -> None:
    """Runs in the spawned scheduler child (one per TP rank and DP replica).

    `duet_args` is DuetArgs.to_dict(); bound with functools.partial by the launcher so that it
    travels to the child with the rest of the process arguments. Everything that must happen
    before SGLang builds the model runner happens here: the CPU patches, the prefill TP
    communicator, and the memory the partition phases need kept out of the KV cache.
    """
    from sglang_duet.runtime import patches

    server_args = args[0] if args else kwargs["server_args"]
    patches.skip_unused_model_modules(server_args.model_path)
    patches.patch_rope_for_cpu()
    patches.patch_tp_groups_for_cpu()
    patches.no_torch_compile_on_cpu()
    patches.store_on_loopback(server_args, (args[1] if len(args) > 1 else kwargs["port_args"])
                              .nccl_port)

    import sglang.srt.managers.scheduler as sched_mod
    import torch

    from sglang_duet.args import DuetArgs
    from sglang_duet.runtime.scheduler import DuetScheduler

    duet = DuetArgs(**duet_args)
    if torch.cuda.is_available() and duet.partition_backend != "none":
        from sglang_duet.runtime.decode_graphs import reserve_for_partitions

        gpu_id = args[2] if len(args) > 2 else kwargs.get("gpu_id", 0)
        total = torch.cuda.get_device_properties(gpu_id).total_memory
        reserve_for_partitions(server_args, duet, total)
        if server_args.tp_size > 1:
            patches.request_prefill_tp_group()
    patches.use_scheduler_class(DuetScheduler.configured(duet))
    sched_mod.run_scheduler_process(*args, **kwargs)
