"""DuetServe policy: BatchPlan, chunked-prefill batch formation, SLO-driven mode switch and the
SM-partition optimizer. Pure Python on top of ``sglang_duet.latency`` (no torch, no SGLang)."""

from __future__ import annotations

from .batching import form_chunked_batch, form_prefill_chunks, truncate_chunks
from .correction import Correction
from .duet import POLICY_MODES, DuetPolicy
from .optimizer import PartitionOptimizer, SpatialChoice
from .plan import BatchPlan
from .sm_menu import SmMenu, menu_decode_sizes, spread_evenly
from .state import PrefillChunk, ReqState

__all__ = [
    "POLICY_MODES",
    "BatchPlan",
    "Correction",
    "DuetPolicy",
    "PartitionOptimizer",
    "PrefillChunk",
    "ReqState",
    "SmMenu",
    "SpatialChoice",
    "form_chunked_batch",
    "form_prefill_chunks",
    "menu_decode_sizes",
    "spread_evenly",
    "truncate_chunks",
]
