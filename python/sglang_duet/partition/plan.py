"""The one rule for which splits exist: what the runtime builds is what the simulator plans with.

The runtime (`runtime.components.build_menu`) asks the partition backend for its granularity,
computes the decode sizes it can make (`sizes.decode_sizes`) and keeps the ones `select_sizes`
keeps; only those splits are created, and the policy's `SmMenu` holds exactly them. The
simulator calls `plan_menu` for a named backend and GPU shape, which runs the same two functions
on the granularity table (`sizes.green_ctx_table_granularity`, `sizes.tpc_granularity`) instead
of the driver's answer. A test holds the two equal.

Whether a spatial decode replays CUDA graphs matters for its host time: a replay costs one graph
launch per step, an eager step launches every layer's kernels (`latency` host kind
``"lookahead"`` vs ``"lookahead_eager"``). Decode graphs are captured per split only on green
contexts (a graph replays in the context it was captured in); libsmctrl's stream masks are
applied at kernel launch, which a graph launch does not go through (unverified on a GPU:
`benchmark/gpu/check.sh` checks it). Pure Python; all counts are SMs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from sglang_duet.policy.sm_menu import SmMenu, spread_evenly

from .sizes import (
    DEFAULT_MIN_SMS,
    GPU_SHAPES,
    Granularity,
    decode_sizes,
    green_ctx_table_granularity,
    tpc_granularity,
)

__all__ = ["GRAPH_BACKENDS", "PLANNED_BACKENDS", "MenuPlan", "Wanted", "every_tpc",
           "graph_memory_bytes", "graphs_wanted", "menu_for", "plan_menu", "select_sizes"]

GRAPH_BACKENDS = ("green-ctx",)
PLANNED_BACKENDS = ("green-ctx", "libsmctrl")  # backends that split a GPU shape
MIB = 1 << 20


class Wanted(NamedTuple):
    """Whether to capture decode graphs per partition, and why (for the start-up log)."""

    want: bool
    why: str


def graphs_wanted(backend: str, cuda_graphs: bool, n: int) -> Wanted:
    """Decode graphs per partition only on a graph backend, with SGLang's graphs on, n > 0."""
    if n <= 0:
        return Wanted(False, "--duet-decode-graph-sizes 0: spatial decode runs eagerly")
    if not cuda_graphs:
        return Wanted(False, "SGLang runs decode without CUDA graphs here")
    if backend not in GRAPH_BACKENDS:
        return Wanted(False, f"partition backend {backend}: graphs would not keep to the partition")
    return Wanted(True, f"decode graphs for {n} partition sizes")


def select_sizes(backend: str, planned: tuple[int, ...], graph_sizes: int,
                 cuda_graphs: bool) -> tuple[tuple[int, ...], Wanted]:
    """The decode sizes to create out of the ``planned`` ones: with decode graphs, only
    ``graph_sizes`` of them spread over the range (each costs a capture), else all."""
    wanted = graphs_wanted(backend, cuda_graphs, graph_sizes)
    return (spread_evenly(planned, graph_sizes) if wanted.want else planned), wanted


def graph_memory_bytes(n_sizes: int, decode_max_bs: int, prefill_workspace_bytes: int = 0) -> int:
    """Memory the partition phases take beyond SGLang's own (bytes), kept out of the KV cache.

    Each partition decode capture is one more SGLang decode capture, for which SGLang itself
    reserves ``max_bs * 2`` MiB (``ServerArgs._handle_gpu_memory_settings``: "max_bs * 2" of
    its reserved memory); the spatial prefill's attention backend has a workspace of its own.
    """
    return n_sizes * decode_max_bs * 2 * MIB + prefill_workspace_bytes


@dataclass(frozen=True)
class MenuPlan:
    """The splits a backend gets on one GPU: decode sizes (SMs, ascending) and whether their
    spatial decode replays captured decode graphs."""

    backend: str
    total_sms: int
    decode_sizes: tuple[int, ...]
    decode_graphs: bool
    why: str

    @property
    def sm_menu(self) -> SmMenu:
        return SmMenu(self.total_sms, self.decode_sizes, math.gcd(*self.decode_sizes))

    @property
    def graph_sizes(self) -> tuple[int, ...]:
        return self.decode_sizes if self.decode_graphs else ()

    @property
    def decode_host(self) -> str:
        """The latency model's host kind of one spatial decode step."""
        return "lookahead" if self.decode_graphs else "lookahead_eager"


def table_granularity(backend: str, hardware: str) -> tuple[int, Granularity]:
    """(SMs, granularity) of ``backend`` on the GPU shape ``hardware`` from the tables."""
    try:
        shape = GPU_SHAPES[hardware]
    except KeyError:
        raise ValueError(f"no GPU shape {hardware!r}; known: {', '.join(GPU_SHAPES)}") from None
    if backend == "green-ctx":
        return shape.num_sms, green_ctx_table_granularity(shape.cc)
    if backend == "libsmctrl":
        return shape.num_sms, tpc_granularity(shape.sms_per_tpc)
    raise ValueError(f"backend {backend!r} has no split to plan; choose from "
                     f"{', '.join(PLANNED_BACKENDS)}")


def menu_for(backend: str, total_sms: int, gran: Granularity, graph_sizes: int = 0,
             cuda_graphs: bool = False, min_decode: int = DEFAULT_MIN_SMS,
             min_prefill: int = DEFAULT_MIN_SMS) -> MenuPlan:
    """The menu of ``backend`` on a device of ``total_sms`` SMs split at ``gran``: every decode
    size it can make (`decode_sizes`), less those `select_sizes` drops. The one menu rule: the
    runtime calls it with the driver's granularity (`runtime.components.build_menu`), the
    simulator with the table's (`plan_menu`). ValueError when no split fits."""
    planned = decode_sizes(total_sms, gran, min_decode, min_prefill)
    sizes, wanted = select_sizes(backend, planned, graph_sizes, cuda_graphs)
    if not sizes:
        raise ValueError(f"{backend}: no split of {total_sms} SMs leaves {min_decode} decode and "
                         f"{min_prefill} prefill SMs")
    return MenuPlan(backend, total_sms, sizes, wanted.want, wanted.why)


def plan_menu(backend: str, hardware: str, graph_sizes: int = 6, cuda_graphs: bool = True,
              min_decode: int = DEFAULT_MIN_SMS, min_prefill: int = DEFAULT_MIN_SMS) -> MenuPlan:
    """The menu the runtime would build for ``backend`` on a ``hardware`` GPU (a `GPU_SHAPES`
    name) with ``--duet-decode-graph-sizes graph_sizes``, from the granularity table."""
    total, gran = table_granularity(backend, hardware)
    return menu_for(backend, total, gran, graph_sizes, cuda_graphs, min_decode, min_prefill)


def every_tpc(total_sms: int, sms_per_tpc: int = 2) -> SmMenu:
    """Every whole-TPC split with one TPC per side at least: the menu planned where no backend
    splits the device (backend none, the CPU), for the policy to plan with."""
    gran = tpc_granularity(sms_per_tpc)
    return menu_for("none", total_sms, gran, 0, False, sms_per_tpc, sms_per_tpc).sm_menu
