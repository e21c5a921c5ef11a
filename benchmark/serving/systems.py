"""The serving systems the comparison knows, and whether each can run on this machine."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from sglang_duet.local_server import Server, cuda_available


@dataclass(frozen=True)
class System:
    name: str
    stock: bool
    flags: tuple[str, ...]  # flags beyond the common ones (model, tp, chunk size)
    chunked: bool  # takes the comparison's --chunked-prefill-size
    description: str


SYSTEMS: dict[str, System] = {
    s.name: s
    for s in (
        System("sglang-default", True, (), False,
               "stock sglang.launch_server, default scheduling (overlap on, SGLang's chunk size)"),
        System("sglang-chunked", True, ("--enable-mixed-chunk",), True,
               "stock sglang.launch_server, chunked prefill mixed into decode batches"),
        # SGLang's pdmux validation: overlap off and chunked prefill off (-1).
        System("sglang-pdmux", True,
               ("--enable-pdmux", "--disable-overlap-schedule", "--chunked-prefill-size", "-1"),
               False, "stock sglang.launch_server --enable-pdmux (green-context SM split)"),
        System("duet", False, (), True, "python -m sglang_duet.launch_server (adaptive)"),
    )
}


def unavailable_reason(system: System) -> str | None:
    """Why the system cannot run here, or None."""
    if system.name == "sglang-pdmux":
        if not cuda_available():
            return ("needs a CUDA GPU: pdmux splits SMs with CUDA green contexts"
                    " (sgl_kernel.spatial)")
        if importlib.util.find_spec("sgl_kernel") is None:
            return "needs sgl_kernel (sglang-kernel) for its green-context streams"
    return None


def parse_systems(spec: str) -> list[System]:
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        raise ValueError(f"unknown systems {unknown}; choose from {sorted(SYSTEMS)}")
    return [SYSTEMS[n] for n in names]


def make_server(system: System, model: str | None, tp: int = 1, chunk: int | None = None,
                extra: list[str] | None = None, log_path: str = "") -> Server:
    args: list[str] = []
    if model:
        args += ["--model-path", model]
    if tp != 1:
        args += ["--tp-size", str(tp)]
    if system.chunked and chunk:
        args += ["--chunked-prefill-size", str(chunk)]
    args += list(system.flags) + list(extra or [])
    return Server(args, stock=system.stock, log_path=log_path)
