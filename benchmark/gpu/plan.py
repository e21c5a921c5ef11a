"""The GPU check's time plan: every step of check.sh with its cap, and whether the whole fits the
device time a task is lent (15 minutes, the machine's start included, one call at most 10).

check.sh reads the caps from here (`python -m benchmark.gpu.plan --shell`), so the plan the
dry run records and the caps the steps run under are one table. Seconds throughout.

Required steps' caps sum to their stage's budget or less; an optional step runs only with the
time its stage has left after the required ones (recorded "skipped" otherwise, which is not a
failure). The plan fits when one machine start, the whole check and one re-run of the largest
stage (with the setup, which a fresh machine needs again) stay inside the device time.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass

DEVICE_TIME_S = 15 * 60  # a task's device time, every start and idle second counted
CALL_LIMIT_S = 10 * 60  # one run call at most
MACHINE_START_S = 120  # the device tool's "1-2 minutes" to start a machine
OVERHEAD_S = 15  # check.sh's own work between steps: collect calls, logs.tar.gz, summary


@dataclass(frozen=True)
class Step:
    stage: str  # "setup", "1" or "2"
    name: str
    cap_s: int
    required: bool
    what: str


STAGE_BUDGET_S: dict[str, int] = {"setup": 90, "1": 120, "2": 225}

STEPS: tuple[Step, ...] = (
    Step("setup", "environment", 10, True, "nvidia-smi, torch, CUDA, nvcc"),
    Step("setup", "kernel", 45, True, "sgl_duet_kernel: the carried wheel, else CMake + nvcc"),
    Step("setup", "install_carry", 35, True, "pip install --no-index the carry's wheels"),
    Step("1", "partition_report", 15, True, "python -m sglang_duet.partition --build"),
    Step("1", "phases_gpu", 30, True,
         "phase joins; primary-context events on green-context streams (else green-ctx is "
         "unusable: the verdict says so)"),
    Step("1", "gpu_tests", 30, True, "the gpu-marked partition tests (%smid sets, refusals)"),
    Step("1", "concurrent_check", 45, True,
         "GEMM + attention on the split's remainder group beside a decode; vs the model"),
    Step("1", "sm_scaling", 40, False, "Fig 3a: bandwidth and FLOP/s against SMs"),
    Step("1", "kernel_partition_tests", 40, False, "CPU tests of kernel/partition, real driver"),
    Step("2", "imports", 15, True, "sgl_kernel (needs the driver), the serving path"),
    Step("2", "warmup", 90, True,
         "JIT (tvm-ffi nvcc) and triton caches filled by one --duet-mode spatial server that "
         "answers the equality prompts (outputs and top-2 logprobs kept)"),
    Step("2", "serving", 110, True,
         "stock SGLang vs sglang-duet on one azure-code slice, the simulator's prediction beside"),
    Step("2", "latency_model", 10, True, "plan logs: predicted vs measured iteration times"),
    Step("2", "equality", 60, False,
         "an aggregated server on the warmup's prompts: equal, or diverging within a logit margin"),
    Step("2", "pdmux", 60, False, "SGLang's pdmux on the same slice"),
)


def steps(stage: str | None = None) -> list[Step]:
    return [s for s in STEPS if stage is None or s.stage == stage]


def time_plan() -> dict:
    """The budget arithmetic the dry run records: per stage the required caps against the
    budget; the whole check against one call; start + check + one re-run against the device
    time (`fits`), and the same with a second machine start for the re-run (a re-run issued
    more than 30 s after the call finds the machine given back)."""
    stages = {}
    for name, budget in STAGE_BUDGET_S.items():
        req = sum(s.cap_s for s in steps(name) if s.required)
        stages[name] = {"budget_s": budget, "required_caps_s": req,
                        "optional_caps_s": sum(s.cap_s for s in steps(name) if not s.required),
                        "caps_fit": req <= budget}
    check_s = sum(STAGE_BUDGET_S.values()) + OVERHEAD_S
    rerun_s = STAGE_BUDGET_S["setup"] + max(STAGE_BUDGET_S["1"], STAGE_BUDGET_S["2"])
    total = MACHINE_START_S + check_s + rerun_s
    return {
        "stages": stages, "check_s": check_s, "call_limit_s": CALL_LIMIT_S,
        "machine_start_s": MACHINE_START_S, "rerun_s": rerun_s, "device_time_s": DEVICE_TIME_S,
        "start_check_rerun_s": total,
        "fits": all(s["caps_fit"] for s in stages.values()) and check_s <= CALL_LIMIT_S
        and total <= DEVICE_TIME_S,
        "fits_with_second_start": total + MACHINE_START_S <= DEVICE_TIME_S,
    }


def shell() -> str:
    """`CAP_<step>=N` per step and `BUDGET_<stage>=N` per stage, for check.sh to eval."""
    lines = [f"CAP_{s.name}={s.cap_s}" for s in STEPS]
    lines += [f"BUDGET_{k}={v}" for k, v in STAGE_BUDGET_S.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    a = sys.argv[1:] if argv is None else argv
    if a == ["--shell"]:
        print(shell())
    else:
        print(json.dumps({"steps": [asdict(s) for s in STEPS], "plan": time_plan()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
