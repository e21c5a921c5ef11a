"""Baseline schedulers as BatchPlan producers (same ``plan(decodes, waiting)`` shape as
``DuetPolicy``), built on the policy package's chunked-prefill batch former.

* ``ChunkedPolicy``: Sarathi-style mixed batches (vLLM / SGLang ``--enable-mixed-chunk``).
* ``PrefillFirstPolicy``: SGLang's default scheduler -- a prefill-only batch whenever prompts
  wait, decode otherwise.
* ``PdmuxPolicy``: SGLang PD-multiplexing -- prefill and decode on fixed SM groups chosen from a
  static table by decode batch size; no latency model (the executor lets its decode stream loop
  while the prefill runs).
"""

from __future__ import annotations

from collections.abc import Sequence

from sglang_duet.policy import BatchPlan, ReqState, SmMenu, form_chunked_batch, form_prefill_chunks

__all__ = ["PDMUX_TABLE", "ChunkedPolicy", "PdmuxPolicy", "PrefillFirstPolicy"]


def _has_prompt(waiting: Sequence[ReqState]) -> bool:
    return any(r.prompt_len > r.computed for r in waiting)


class _NoFeedback:
    def observe(self, plan: BatchPlan, measured_s: float, decode_s: float | None = None,
                prefill_s: float | None = None) -> None:
        """Baselines do not learn from measured times."""


class ChunkedPolicy(_NoFeedback):
    """Mixed chunked-prefill batches (all decodes + FIFO chunks up to the token budget)."""

    def __init__(self, total_sms: int, token_budget: int = 8192) -> None:
        self.total_sms = total_sms
        self.token_budget = token_budget

    def plan(self, decodes: Sequence[ReqState], waiting: Sequence[ReqState]) -> BatchPlan:
        rids, chunks = form_chunked_batch(decodes, waiting, self.token_budget)
        if not rids and not chunks:
            return BatchPlan.idle()
        s = self.total_sms
        return BatchPlan.aggregated(rids, chunks, s, reason="chunked prefill")


class PrefillFirstPolicy(_NoFeedback):
    """Prefill-only batches first whenever prompts wait; decode-only batches otherwise."""

    def __init__(self, total_sms: int, token_budget: int = 8192) -> None:
        self.total_sms = total_sms
        self.token_budget = token_budget

    def plan(self, decodes: Sequence[ReqState], waiting: Sequence[ReqState]) -> BatchPlan:
        s = self.total_sms
        if _has_prompt(waiting):
            chunks = form_prefill_chunks(waiting, self.token_budget)
            return BatchPlan.aggregated((), chunks, s, reason="prefill first")
        if not decodes:
            return BatchPlan.idle()
        rids = tuple(r.rid for r in decodes)
        return BatchPlan.decode_only(rids, s, reason="no prompt waiting")


# Decode share of the SMs by decode batch size, in eighths of the GPU (our static table in the
# spirit of SGLang's PD-multiplexing SM groups; upper bound of the batch size -> eighths).
PDMUX_TABLE: tuple[tuple[int, int], ...] = ((8, 2), (32, 3), (128, 4), (1 << 30, 5))


class PdmuxPolicy(_NoFeedback):
    """Fixed SM split by decode batch size; prefill-only batch up to the budget on the rest."""

    def __init__(self, menu: SmMenu, token_budget: int = 8192) -> None:
        self.menu = menu
        self.total_sms = menu.total_sms
        self.token_budget = token_budget

    def sms_for(self, n_decode: int) -> int:
        eighths = next(e for bound, e in PDMUX_TABLE if n_decode <= bound)
        want = self.total_sms * eighths // 8
        sizes = self.menu.decode_sizes
        i = min(self.menu.index_at_least(want), len(sizes) - 1)
        return sizes[i]

    def plan(self, decodes: Sequence[ReqState], waiting: Sequence[ReqState]) -> BatchPlan:
        s = self.total_sms
        rids = tuple(r.rid for r in decodes)
        if not _has_prompt(waiting):
            if not rids:
                return BatchPlan.idle()
            return BatchPlan.decode_only(rids, s, reason="decode only")
        chunks = form_prefill_chunks(waiting, self.token_budget)
        if not rids:
            return BatchPlan.aggregated((), chunks, s, reason="prefill only")
        sd = self.sms_for(len(rids))
        return BatchPlan.spatial(rids, chunks, sd, s - sd,
                                 reason=f"static split for {len(rids)} decodes")
