"""What the server's routers share: SGLang load snapshots as `ReplicaLoad`s, and the router
context (the replicas' latency model, tau, token budget) built from the server's flags. No SGLang
import here; the callers pass SGLang's objects in."""

from __future__ import annotations

from typing import Any

from sglang_duet.router import ReplicaLoad, RouterContext

__all__ = ["router_context", "snapshot_to_load", "token_budget"]

DEFAULT_BUDGET = 8192  # SGLang's chunked-prefill size when the flag leaves it unset


def snapshot_to_load(s: Any) -> ReplicaLoad:
    """A `sglang.srt.managers.load_snapshot.LoadSnapshot` as a `ReplicaLoad`."""
    return ReplicaLoad(
        replica=int(s.dp_rank),
        running=int(s.num_running_reqs),
        waiting=int(s.num_waiting_reqs),
        context_tokens=int(s.num_used_tokens),
        queued_tokens=int(s.num_waiting_uncached_tokens),
        total_tokens=int(s.num_total_tokens),
        capacity_tokens=int(s.max_total_num_tokens),
        timestamp=float(s.timestamp),
    )


def token_budget(server_args: Any) -> int:
    size = getattr(server_args, "chunked_prefill_size", None)
    return int(size) if size and size > 0 else DEFAULT_BUDGET


def router_context(duet_args: dict[str, Any], server_args: Any) -> RouterContext:
    """The latency model of one replica (TP = --tp-size) on the detected hardware, and the
    replicas' admission order (``--duet-admission``), which the duet router's first-token
    prediction follows."""
    from sglang_duet.args import DuetArgs
    from sglang_duet.latency import Calibration, LatencyModel, ModelSpec
    from sglang_duet.runtime.components import build_admission, detect_hardware

    args = DuetArgs(**duet_args)
    device = str(getattr(server_args, "device", None) or "cuda")
    hardware = detect_hardware(args.hardware, device, int(server_args.base_gpu_id or 0))
    model = ModelSpec.from_hf_config(server_args.model_path, tp=int(server_args.tp_size))
    calibration = Calibration.load(args.calibration) if args.calibration else None
    latency = LatencyModel(hardware, model, calibration)
    return RouterContext(latency=latency, tbt_slo_s=args.tbt_slo_s,
                         token_budget=token_budget(server_args),
                         admission=build_admission(args, latency))
