"""SGLang 0.5.17's PD-multiplexing (``--enable-pdmux``) as a BatchPlan producer, by its own rules.

Stream groups -- ``sglang/srt/multiplex/pdmux_context.py``:

* ``divide_sm(total_sms, compute_capability, groups)`` with ``groups = sm_group_num - 2`` and
  ``PDMuxConfig.sm_group_num = 8``: candidate prefill sizes step by the green-context multiple
  from the minimum partition (``get_arch_constraints``: 8 and 8 on Hopper, 4 and 2 on Ampere),
  keeping only splits with prefill SMs >= decode SMs and decode SMs >= 16; at most ``groups``
  of them, evenly strided, largest prefill first. On a 132-SM H100: (112, 20), (104, 28),
  (96, 36), (88, 44), (80, 52), (72, 60) as (prefill, decode) SMs.
* ``initialize_stream_groups`` puts a whole-GPU prefill group first (index 0) and a whole-GPU
  decode group last.

Scheduling -- ``sglang/srt/multiplex/multiplexing_mixin.py``:

* ``adjust_stream_groups``: with running decodes and a split prefill batch, group index
  ``max(1, min(G - 2, decode_bs * (G - 2) // decode_bs_divisor))`` (G = 8 groups,
  ``decode_bs_divisor = 36``); running decodes only: the decode group; else the prefill group.
  It runs only when a prefill batch is created or finishes, so the split chosen at the
  prefill's start holds until that prefill ends.
* ``event_loop_pdmux``: each loop runs one decode step on the decode stream and launches
  ``max(1, split_forward_token_budget // extend_num_tokens)`` more layers of the prefill
  (``split_forward_token_budget = 65536``) on the prefill stream, then waits for the decode
  step; the prefill's end is seen by a poll after a decode step. So decode free-runs for the
  whole prefill: the executor (``free_running``) runs ``ceil(t_p' / t_d)`` decode steps and the
  iteration ends with the step that sees the prefill done, where ``t_p'`` is the prefill's
  time fed one slice of layers per loop (``executor.sliced_prefill_s``).
* ``update_split_prefill_batch``: a new prefill batch only once the previous one finished, formed
  by SGLang's ``PrefillAdder`` with chunked prefill off (``server_args.py`` asserts
  ``chunked_prefill_size == -1`` under pdmux): whole requests in FIFO order, the first always,
  later ones while they fit the rest of ``max_prefill_tokens`` (16384;
  ``schedule_policy.py`` ``PrefillAdder.add_one_req``).

Each decode step pays a CPU-scheduled pass's host time (the executor, from the latency model's
host term). Decode CUDA graphs are captured once per stream group (``DecodeCudaGraphRunner``'s
capture loop over ``get_stream_groups()``, each group with a decode attention backend of its
own): their memory is kept out of the KV pool by the estimate duet's partition captures pay
(`sim.policies` ``_pdmux_graphs``). Costs the model leaves out (so this baseline is, if
anything, favoured): the stream synchronisations at every group switch, the host work of each
layer slice, the TP all-reduce of the completion flag every loop, graph replays on green
contexts being slower (SGLang warns of it with torch >= 2.7), and decode steps whose batch
shrinks or contexts grow during a long prefill (timed at the first step's batch here).
"""

from __future__ import annotations

from collections.abc import Sequence

from sglang_duet.policy import BatchPlan, PrefillChunk, ReqState

__all__ = ["MAX_PREFILL_TOKENS", "PdmuxPolicy", "arch_constraints", "divide_sm"]

SM_GROUP_NUM = 8  # PDMuxConfig.sm_group_num
DECODE_BS_DIVISOR = 36  # PDMuxConfig.decode_bs_divisor
MAX_PREFILL_TOKENS = 16384  # ServerArgs.max_prefill_tokens
MIN_DECODE_SMS = 16
# get_arch_constraints by compute capability -> (min SMs per part, multiple); our profiles
ARCH: dict[str, tuple[int, int]] = {"h100-sxm": (8, 8), "h200": (8, 8), "a100-80g": (4, 2)}


def arch_constraints(hardware: str) -> tuple[int, int]:
    try:
        return ARCH[hardware]
    except KeyError:
        raise ValueError(f"sglang-pdmux has no green-context rule for {hardware!r}") from None


def divide_sm(total_sms: int, min_part: int, multiple: int, groups: int) -> list[tuple[int, int]]:
    """(prefill SMs, decode SMs) splits by the rule of ``pdmux_context.divide_sm``."""
    values = [x for x in range(min_part, total_sms - min_part + 1, multiple)
              if x >= total_sms - x and total_sms - x >= MIN_DECODE_SMS]
    if not values:
        raise ValueError(f"no pdmux split for {total_sms} SMs")
    if len(values) >= groups:
        values = values[::max(1, len(values) // groups)][:groups]
    return [(x, total_sms - x) for x in reversed(values)]


def whole_request_batch(waiting: Sequence[ReqState], max_tokens: int) -> tuple[PrefillChunk, ...]:
    """FIFO whole requests: the first always, then while each fits the tokens left."""
    out: list[PrefillChunk] = []
    left = max_tokens
    for r in waiting:
        n = r.prompt_len - r.computed
        if n <= 0:
            continue
        if out and n >= left:
            break
        out.append(PrefillChunk(r.rid, r.computed, n))
        left -= n
    return tuple(out)


class PdmuxPolicy:
    """See the module docstring; no latency model, no feedback."""

    def __init__(self, total_sms: int, hardware: str, max_prefill_tokens: int = MAX_PREFILL_TOKENS,
                 decode_bs_divisor: int = DECODE_BS_DIVISOR) -> None:
        self.total_sms = total_sms
        self.max_prefill_tokens = max_prefill_tokens
        self.decode_bs_divisor = decode_bs_divisor
        self.divisions = divide_sm(total_sms, *arch_constraints(hardware), SM_GROUP_NUM - 2)
        self.groups = len(self.divisions) + 2

    def split_for(self, decode_bs: int) -> tuple[int, int]:
        """(prefill SMs, decode SMs) of ``adjust_stream_groups`` for this decode batch size."""
        g = self.groups - 2
        idx = max(1, min(g, decode_bs * g // self.decode_bs_divisor))
        return self.divisions[idx - 1]

    def plan(self, decodes: Sequence[ReqState], waiting: Sequence[ReqState],
             backlog: bool = False, kv_held: bool = False,
             kv_use: float = 0.0) -> BatchPlan:
        s = self.total_sms
        rids = tuple(r.rid for r in decodes)
        chunks = whole_request_batch(waiting, self.max_prefill_tokens)
        if not chunks:
            if not rids:
                return BatchPlan.idle()
            return BatchPlan("decode_only", rids, (), s, 0, 1, 0.0, 0.0, 0.0, "decode group")
        if not rids:
            return BatchPlan("aggregated", (), chunks, s, s, 1, 0.0, 0.0, 0.0, "prefill group")
        sp, sd = self.split_for(len(rids))
        return BatchPlan("spatial", rids, chunks, sd, sp, 1, 0.0, 0.0, 0.0,
                         f"group for {len(rids)} decodes: {sp} prefill / {sd} decode SMs")

    def observe(self, plan: BatchPlan, measured_s: float, decode_s: float | None = None,
                prefill_s: float | None = None) -> None:
        """pdmux does not learn from measured times."""
