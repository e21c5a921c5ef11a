"""Baseline schedulers as BatchPlan producers (same ``plan(decodes, waiting)`` shape as
``DuetPolicy``), built on the policy package's chunked-prefill batch former.

* ``ChunkedPolicy``: Sarathi-style mixed batches (vLLM / SGLang ``--enable-mixed-chunk``).
* ``PrefillFirstPolicy``: SGLang's default scheduler -- a prefill-only batch whenever prompts
  wait, decode otherwise.

SGLang's PD-multiplexing is in ``pdmux.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from sglang_duet.policy import BatchPlan, ReqState, form_chunked_batch, form_prefill_chunks

__all__ = ["ChunkedPolicy", "PrefillFirstPolicy"]


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

    def plan(self, decodes: Sequence[ReqState], waiting: Sequence[ReqState],
             backlog: bool = False, kv_held: bool = False,
             kv_use: float = 0.0) -> BatchPlan:
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

    def plan(self, decodes: Sequence[ReqState], waiting: Sequence[ReqState],
             backlog: bool = False, kv_held: bool = False,
             kv_use: float = 0.0) -> BatchPlan:
        s = self.total_sms
        if _has_prompt(waiting):
            chunks = form_prefill_chunks(waiting, self.token_budget)
            return BatchPlan.aggregated((), chunks, s, reason="prefill first")
        if not decodes:
            return BatchPlan.idle()
        rids = tuple(r.rid for r in decodes)
        return BatchPlan.decode_only(rids, s, reason="no prompt waiting")
