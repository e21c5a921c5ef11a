"""Scheduler-process entry: SGLang's run_scheduler_process with DuetScheduler substituted."""

from __future__ import annotations

from typing import Any


def run_duet_scheduler_process(duet_args: dict[str, Any], *args: Any, **kwargs: Any) -> None:
    """Runs in the spawned scheduler child (one per TP rank and DP replica).

    `duet_args` is DuetArgs.to_dict(); bound with functools.partial by the launcher so that it
    travels to the child with the rest of the process arguments.
    """
    from sglang_duet.cpu import patch_rope_for_cpu, patch_tp_groups_for_cpu

    patch_rope_for_cpu()
    patch_tp_groups_for_cpu()

    import sglang.srt.managers.scheduler as sched_mod

    from sglang_duet.args import DuetArgs
    from sglang_duet.runtime import scheduler as duet_sched

    duet = DuetArgs(**duet_args)
    duet_sched.DUET_ARGS = duet
    server_args = args[0] if args else kwargs["server_args"]
    import torch

    if torch.cuda.is_available() and server_args.tp_size > 1 and (
        duet.partition_backend != "none"
    ):
        from sglang_duet.runtime.tp_groups import request_prefill_tp_group

        request_prefill_tp_group()
    # run_scheduler_process looks the class up as a module global at call time.
    sched_mod.Scheduler = duet_sched.DuetScheduler
    sched_mod.run_scheduler_process(*args, **kwargs)
