"""What the KV pool's occupancy does to the plan while prompt work is backlogged.

Every running request holds its KV until it finishes, so the running set is about arrival rate
x output length x decode step: a policy that runs every decode step near tau (to give prefill
the most SMs) holds about twice the requests, and twice the KV, of one stepping at half of it.
Where the pool binds, admission then stops and the queue grows, however fast prefill could go:
on azure-conv with Qwen3-8B, duet's running set was 1.5x pdmux's (whose decode steps take about
30 ms) and its pool was full at a load pdmux served with the pool at 58%. So the policy reads the
pool's occupancy ``kv_use`` (the share of its slots held by requests, an admitted prompt's
whole prompt counting from admission, 0-1; 1 while the pool holds a waiting prompt back) and,
by default (``BACKLOG_AUTO``):

* while prompts queue beyond one iteration, every option the gap scheme weighs aims its decode
  step at ``share * tau``, the share falling linearly from 1 at ``KV_LOW`` occupancy to
  ``AUTO_FLOOR`` at ``KV_HIGH`` (`auto_share`);
* from ``KV_SPLIT_AT`` occupancy, the adaptive mode no longer mixes prefill into the decodes'
  batch: a mixed iteration makes every running decode wait out the prefill chunk, a split lets
  them step on their own SMs (`split_only`).

A fixed ``--duet-backlog-share S`` (0 < S <= 1) aims at S x tau while backlogged and ignores the
pool. Measured in the simulator (`benchmark.capacity`'s rule, 2x H100, the runtime's menu) over
four seeds each (`benchmark/results/capacity/seeds.md`): see the module's commit and that file.
The occupancy rule replaced an AIMD share that moved only once the pool held prompts back (too
late: the running set had already grown).
"""

from __future__ import annotations

__all__ = ["AUTO_FLOOR", "BACKLOG_AUTO", "BACKLOG_DECODE_SHARE", "KV_HIGH", "KV_LOW",
           "KV_SPLIT_AT", "auto_share", "check_share", "split_only"]

BACKLOG_AUTO = 0.0  # the share follows the KV pool (the module docstring)
BACKLOG_DECODE_SHARE = BACKLOG_AUTO  # the default of --duet-backlog-share
KV_LOW = 0.4  # occupancy up to which the automatic share is 1
KV_HIGH = 0.7  # occupancy from which it is AUTO_FLOOR
AUTO_FLOOR = 0.3
KV_SPLIT_AT = 0.5  # occupancy from which the adaptive mode runs no mixed batch


def check_share(share: float) -> float:
    """``share`` if it is ``BACKLOG_AUTO`` or in (0, 1]; ValueError otherwise."""
    if share != BACKLOG_AUTO and not 0.0 < share <= 1.0:
        raise ValueError(f"backlog_share must be in (0, 1] or {BACKLOG_AUTO:g} (automatic), "
                         f"got {share}")
    return float(share)


def auto_share(kv_use: float) -> float:
    """The automatic share of tau at pool occupancy ``kv_use`` (0-1)."""
    if kv_use <= KV_LOW:
        return 1.0
    if kv_use >= KV_HIGH:
        return AUTO_FLOOR
    return 1.0 - (kv_use - KV_LOW) / (KV_HIGH - KV_LOW) * (1.0 - AUTO_FLOOR)


def split_only(kv_use: float) -> bool:
    """Whether the adaptive mode keeps prefill out of the decodes' batch at this occupancy."""
    return kv_use >= KV_SPLIT_AT
