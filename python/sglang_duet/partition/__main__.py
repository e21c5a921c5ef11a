"""python -m sglang_duet.partition: which backends work here, what `auto` picks, the menu.

On a machine without a GPU, `--hardware h100-sxm|h200|a100-80g` (aliases h100, a100) shows the
menus the backends would build on that GPU (granularity from NVIDIA's per-architecture table).
"""

from __future__ import annotations

import argparse
import logging
import sys

from .libsmctrl import SMS_PER_TPC
from .partition_menu import PartitionMenu
from .registry import AUTO_ORDER, BACKEND_NAMES, get_backend, probe_all, select_backend
from .sizes import DEFAULT_MIN_SMS, GPU_SHAPES, green_ctx_table_granularity, tpc_granularity


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m sglang_duet.partition", description=__doc__)
    p.add_argument("--backend", choices=BACKEND_NAMES, default="auto")
    p.add_argument("--device", type=int, default=0, help="CUDA device ordinal")
    p.add_argument("--hardware", choices=sorted(GPU_SHAPES), help="plan for this GPU instead")
    p.add_argument("--min-decode", type=int, default=DEFAULT_MIN_SMS, help="SMs")
    p.add_argument("--min-prefill", type=int, default=DEFAULT_MIN_SMS, help="SMs")
    p.add_argument(
        "--build", action="store_true", help="really create the streams on the GPU (and free them)"
    )
    return p.parse_args(argv)


def _hypothetical(hw: str, min_decode: int, min_prefill: int) -> None:
    shape = GPU_SHAPES[hw]
    arch = f"sm_{shape.cc[0]}{shape.cc[1]}"
    print(f"\nmenus on a hypothetical {shape.name} ({shape.num_sms} SMs, {arch}):")
    grans = {
        "green-ctx": green_ctx_table_granularity(shape.cc),
        "libsmctrl": tpc_granularity(SMS_PER_TPC),
        "none": None,
    }
    for name in AUTO_ORDER:
        menu = PartitionMenu.plan(name, shape.num_sms, grans[name], min_decode, min_prefill)
        print(menu.describe())


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    print("partition backends:")
    for name, (ok, why) in probe_all(args.device).items():
        print(f"  {name:10s} {'available' if ok else 'unavailable':11s} {why}")
    backend, reason = select_backend(args.backend, args.device)
    print(f"\nselected: {reason}")
    if args.hardware:
        _hypothetical(args.hardware, args.min_decode, args.min_prefill)
        return 0
    if not backend.partitions:
        total = backend.num_sms(args.device)
        print(f"\nmenu: none (one stream{f' on {total} SMs' if total else ''})")
        if total == 0:
            print("no CUDA device here; pass --hardware h100-sxm|h200|a100-80g to see a planned"
                  " menu")
        return 0
    if args.build:
        menu = PartitionMenu.build(
            get_backend(backend.name), args.device, args.min_decode, args.min_prefill
        )
        try:
            print("\nbuilt menu:\n" + menu.describe())
        finally:
            menu.close()
        return 0
    menu = PartitionMenu.plan(
        backend.name,
        backend.num_sms(args.device),
        backend.granularity(args.device),
        args.min_decode,
        args.min_prefill,
    )
    print("\nmenu it would build (--build creates it):\n" + menu.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
