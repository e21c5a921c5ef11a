"""Build the scheduler's collaborators once at start-up: hardware profile, model spec, partition
menu and the DuetPolicy. No SGLang import; torch only to name the device."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from sglang_duet.args import DuetArgs
from sglang_duet.latency import Calibration, HardwareSpec, LatencyModel, ModelSpec, get_hardware
from sglang_duet.latency.interference import DEFAULT_INTERFERENCE
from sglang_duet.partition.plan import MenuPlan, every_tpc, menu_for
from sglang_duet.partition.sizes import Granularity
from sglang_duet.policy import DuetPolicy, SmMenu
from sglang_duet.policy.admission import Admission, model_prefill_seconds

logger = logging.getLogger(__name__)

# A stand-in profile for CPU serving (tests, the embedded model): a 2-core machine as 16 "SMs".
# Its absolute numbers are rough (~50 GFLOP/s, ~20 GB/s); online correction rescales them to the
# measured iteration times, which is all the CPU runs need.
CPU_PROFILE = HardwareSpec(
    name="cpu",
    num_sms=16,
    sms_per_tpc=2,
    flops=50e9,
    hbm_bw=20e9,
    hbm_bytes=24 * 10**9,
    link_bw=10e9,
    bw_knee=get_hardware("h100-sxm").bw_knee,
    bw_hill=get_hardware("h100-sxm").bw_hill,
)

_DEVICE_NAMES = (("H200", "h200"), ("H100", "h100-sxm"), ("H800", "h100-sxm"), ("A100", "a100-80g"))


def detect_hardware(name: str, device: str, gpu_id: int = 0) -> HardwareSpec:
    if name == "cpu" or (name == "auto" and device == "cpu"):
        return CPU_PROFILE
    if name != "auto":
        return get_hardware(name)
    import torch

    dev = torch.cuda.get_device_name(gpu_id)
    for key, profile in _DEVICE_NAMES:
        if key in dev:
            logger.info("duet: hardware profile %s for %s", profile, dev)
            return get_hardware(profile)
    logger.warning("duet: no profile for %r; using h100-sxm (give --duet-hardware)", dev)
    return get_hardware("h100-sxm")


class Menus(NamedTuple):
    """What `build_menu` returns: the policy's menu, the partitions (None: no partitioning),
    the backend's name and the decode sizes that get their own decode CUDA graphs."""

    sm_menu: SmMenu
    partitions: Any
    backend: str
    graph_sizes: tuple[int, ...]


@dataclass
class DuetComponents:
    policy: DuetPolicy
    hardware: HardwareSpec
    model: ModelSpec
    partitions: Any  # sglang_duet.partition.PartitionMenu or None (no partitioning)
    backend_name: str
    graph_sizes: tuple[int, ...] = ()  # decode sizes that get their own decode CUDA graphs
    admission: Admission | None = None  # the waiting queue's order; None: SGLang's (fcfs)


# This rank's value -> every TP rank's, in rank order (`tp_groups.gather`); None with TP = 1.
Agree = Callable[[Any], list[Any]]


def build_menu(args: DuetArgs, hardware: HardwareSpec, device: str, gpu_id: int,
               cuda_graphs: bool = False, agree: Agree | None = None) -> Menus:
    """The menus, built once at start-up.

    A backend that is unavailable or refuses every split falls back to `none` (the partition
    package logs why; a split it refuses alone is dropped), as does one whose streams refuse
    primary-context events (`usable_menu`). With TP > 1 every rank keeps the same splits
    (`agree`). With `none`, spatial plans run decode then prefill on the same
    device, one after the other; the menu still describes the device so the policy can plan.
    Which sizes are created is `partition.plan.menu_for`, the rule the simulator plans with too
    (`partition.plan.plan_menu`): with decode graphs per partition, only
    `--duet-decode-graph-sizes` sizes spread over the menu are created at all.
    """
    if args.mode == "aggregated":  # never splits: no partitions, no graphs, no reserve
        logger.info("duet: --duet-mode aggregated: no SM partitions are built")
    elif device != "cpu":
        from sglang_duet.partition import build_partition_menu

        plans: list[MenuPlan] = []

        def keep(backend: str, total: int, gran: Granularity) -> tuple[int, ...]:
            m = args.partition_min_sms
            plans.append(menu_for(backend, total, gran, args.decode_graph_sizes, cuda_graphs,
                                  m, m))
            logger.info("duet: %s", plans[-1].why)
            return plans[-1].decode_sizes

        menu, reason = build_partition_menu(args.partition_backend, gpu_id,
                                            args.partition_min_sms, args.partition_min_sms,
                                            select=keep)
        logger.info("duet: partition backend %s (%s)", menu.backend, reason)
        usable = usable_menu(menu, agree)
        if usable is not None:
            graphs = usable.decode_sizes if plans and plans[-1].decode_graphs else ()
            return Menus(usable.sm_menu, usable, usable.backend, graphs)
    elif args.partition_backend not in ("auto", "none"):
        logger.warning("duet: --duet-partition-backend %s needs a GPU; using none",
                       args.partition_backend)
    return Menus(every_tpc(hardware.num_sms, hardware.sms_per_tpc), None, "none", ())


def usable_menu(menu: Any, agree: Agree | None = None) -> Any:
    """`menu` restricted to the splits every TP rank built, or None (its streams released:
    the server runs with backend `none`) when none is left or its streams refuse the primary
    context's events, which SGLang's decode replay records on them (`partition.events`).
    `agree`: called once on every rank (a collective), whatever this rank found."""
    from sglang_duet.partition import cross_context_events

    sizes = menu.decode_sizes
    refused = cross_context_events(menu) if sizes else ""
    if refused:
        logger.warning("duet: partition backend %s is unusable: its streams refuse a "
                       "primary-context event (%s), which SGLang's decode replay records on "
                       "them; falling back to partition backend none", menu.backend, refused)
        sizes = ()
    if agree is not None:
        per_rank = agree((menu.backend, sizes))
        common = set(sizes).intersection(*(set(s) for b, s in per_rank if b == menu.backend))
        if any(b != menu.backend for b, _ in per_rank):
            common = set()
        if common != set(sizes):
            listing = "; ".join(f"rank {i}: {b} {list(s)}" for i, (b, s) in enumerate(per_rank))
            logger.warning("duet: TP ranks built different splits (%s); every rank keeps %s",
                           listing, sorted(common) or "none (backend none)")
        sizes = tuple(sorted(common))
    if not sizes:
        menu.close()
        return None
    return menu if sizes == menu.decode_sizes else menu.restrict(sizes)


def model_spec(hf_config: Any, tp_size: int) -> ModelSpec:
    """The latency model's view of SGLang's loaded config: works for a local directory and for
    a hub id that SGLang resolved from the HF cache alike (no path is opened here)."""
    cfg = hf_config if isinstance(hf_config, dict) else hf_config.to_dict()
    return ModelSpec.from_hf_config(cfg, tp=tp_size)


def build_components(args: DuetArgs, *, hf_config: Any, tp_size: int, device: str, gpu_id: int,
                     token_budget: int, cuda_graphs: bool = False,
                     agree: Agree | None = None) -> DuetComponents:
    """`hf_config`: SGLang's loaded `model_config.hf_config` (or its dict); `agree`: as in
    `build_menu` (TP > 1)."""
    hardware = detect_hardware(args.hardware, device, gpu_id)
    model = model_spec(hf_config, tp_size)
    calibration = Calibration.load(args.calibration) if args.calibration else None
    latency = LatencyModel(hardware, model, calibration, DEFAULT_INTERFERENCE)
    menus = build_menu(args, hardware, device, gpu_id, cuda_graphs, agree)
    policy = DuetPolicy(
        mode=args.mode,
        tbt_slo_s=args.tbt_target_s,  # the SLO less the front end's headroom
        token_budget=token_budget,
        max_lookahead=args.max_lookahead,
        latency=latency,
        menu=menus.sm_menu,
        correction=args.online_correction,
        backlog_share=args.backlog_share,
        # a spatial decode step replays a captured graph only on the graph sizes
        decode_host="lookahead" if menus.graph_sizes else "lookahead_eager",
    )
    return DuetComponents(policy, hardware, model, menus.partitions, menus.backend,
                          menus.graph_sizes, build_admission(args, latency))


def build_admission(args: DuetArgs, latency: LatencyModel) -> Admission | None:
    """The order the scheduler admits waiting prompts in (``--duet-admission``), its prefill
    seconds fitted once from ``latency`` (the uncorrected model: a request's order must not
    move with each iteration's correction); None with ``fcfs``: SGLang's queue is left as its
    ``--schedule-policy`` sorts it."""
    if args.admission == "fcfs":
        return None
    return Admission(args.admission_config, model_prefill_seconds(latency))
