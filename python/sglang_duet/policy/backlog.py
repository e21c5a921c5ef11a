"""The decode-step target while prompt work is backlogged, as a share of tau.

While prompts queue beyond one iteration, every option the gap scheme weighs aims its decode
step at ``share * tau`` (`duet.DuetPolicy.plan`). A faster step finishes running requests sooner
and frees their KV for the queue, which pays where the KV pool holds prompts back; where the
token budget (prefill) holds them back it only takes SMs from prefill. So the share either is
fixed (``--duet-backlog-share S``, 0 < S <= 1; 1: tau itself) or, by default
(``BACKLOG_AUTO``), follows the KV pool: each plan made while the pool holds a waiting prompt
back lowers it by ``AUTO_DOWN`` (down to ``AUTO_FLOOR``), each plan made while it does not raises
it by ``AUTO_UP`` (up to 1). The steps are per plan (an iteration, 10-100 ms): a second of KV
pressure takes the target to the floor, and it recovers over tens of seconds, about the time
requests take to finish (AIMD, like a congestion window).

Measured in the simulator (`benchmark.capacity`'s rule, 2x H100, the runtime's menu, Qwen3-8B;
4,000 requests per run, and 8,000 in brackets): azure-conv's default capacity is 39.3 (37.4)
req/s at share 1 and 40.3 (39.8) with the automatic share, against the best fixed share's
41.3 (39.8, share 0.5); azure-code (34.2), mooncake (1.60) and Qwen3-14B TP=2 azure-conv (20.6)
as at share 1, where the pool rarely holds prompts back; mooncake with Qwen3-14B 1.19 against
1.21, within the search's step. A floor of 0.3 with steps 0.02 / 0.002 reached 41.4 on
azure-conv but fell to 38.8 over 8,000 requests (a fall past 5% that sets the reported figure).
"""

from __future__ import annotations

__all__ = ["AUTO_DOWN", "AUTO_FLOOR", "AUTO_UP", "BACKLOG_AUTO", "BACKLOG_DECODE_SHARE",
           "check_share", "next_share"]

BACKLOG_AUTO = 0.0  # the share follows the KV pool (the module docstring)
BACKLOG_DECODE_SHARE = BACKLOG_AUTO  # the default of --duet-backlog-share
AUTO_FLOOR = 0.5
AUTO_DOWN = 0.05
AUTO_UP = 0.001


def check_share(share: float) -> float:
    """``share`` if it is ``BACKLOG_AUTO`` or in (0, 1]; ValueError otherwise."""
    if share != BACKLOG_AUTO and not 0.0 < share <= 1.0:
        raise ValueError(f"backlog_share must be in (0, 1] or {BACKLOG_AUTO:g} (automatic), "
                         f"got {share}")
    return float(share)


def next_share(share: float, kv_held: bool) -> float:
    """The automatic share after one plan: lower while the KV pool holds a prompt back."""
    if kv_held:
        return max(AUTO_FLOOR, share - AUTO_DOWN)
    return min(1.0, share + AUTO_UP)
