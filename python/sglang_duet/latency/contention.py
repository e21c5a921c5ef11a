"""Two iterations on disjoint SM partitions sharing the device's HBM bandwidth.

Each side is first predicted alone on its partition. While both run, their combined HBM traffic
may not exceed ``cap`` (peak bandwidth times the best bandwidth efficiency of any kernel): if the
two average demand rates ``bytes / time`` add up to more, both progress at the rate
``rho = cap / (demand_d + demand_p)`` until the shorter finishes; the longer then runs alone at
full speed. So a memory-bound decode slows when a prefill's traffic competes with it, and never
gains from it.

`interference.py` then adds the slowdown published co-runs show below this cap. `combine` works
on two Breakdowns, `combine_pair` on two total times, `combine_totals` on arrays of them (one
entry per partition pair); they perform the same floating-point operations, so they agree bit
for bit.
"""

from __future__ import annotations

import numpy as np

from .breakdown import Breakdown


def combine(cap: float, d: Breakdown, p: Breakdown) -> tuple[Breakdown, Breakdown]:
    """(d, p) predicted alone -> (d, p) when they overlap; see the module docstring."""
    if d.total_s <= 0.0 or p.total_s <= 0.0:
        return d, p
    d_new, p_new = combine_pair(cap, d.total_s, d.bytes, p.total_s, p.bytes)
    if d_new == d.total_s and p_new == p.total_s:  # the demand fits
        return d, p
    return stretched(d, d_new), stretched(p, p_new)


def combine_pair(cap: float, t_d: float, bytes_d: float, t_p: float, bytes_p: float
                 ) -> tuple[float, float]:
    """`combine` on two alone totals (seconds, both > 0) and their bytes: the totals when the
    two overlap."""
    demand = bytes_d / t_d + bytes_p / t_p
    if demand <= cap:
        return t_d, t_p
    rho = cap / demand
    if t_d <= t_p:
        return t_d / rho, t_p + t_d * (1.0 / rho - 1.0)
    return t_d + t_p * (1.0 / rho - 1.0), t_p / rho


def stretched(b: Breakdown, total_s: float) -> Breakdown:
    """`b` with its total set to `total_s` and every time component scaled alike."""
    f = total_s / b.total_s
    return Breakdown(total_s, b.token_ops_s * f, b.attention_s * f, b.comm_s * f,
                     b.lm_head_s * f, b.flops, b.bytes, b.host_s * f)


def combine_totals(
    cap: float, t_d: np.ndarray, bytes_d: float, t_p: np.ndarray, bytes_p: float,
    positive: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """`combine` on arrays of alone totals (each side's bytes do not depend on its SMs).
    ``positive``: the caller knows every time is > 0 (skips the empty-side mask)."""
    # rho = 1 where demand fits: the formulas below then return t_d and t_p unchanged, exactly
    # (x / 1.0 == x, x + s * 0.0 == x)
    if positive:
        demand = bytes_d / t_d + bytes_p / t_p
        if np.maximum.reduce(demand) <= cap:  # the usual case: fits at every pair, nothing changes
            return t_d, t_p
        rho = cap / np.maximum(demand, cap)
    else:  # a pair with an empty side (zero time) runs unchanged, as in `combine`
        ok = (t_d > 0.0) & (t_p > 0.0)
        demand = bytes_d / np.where(ok, t_d, 1.0) + bytes_p / np.where(ok, t_p, 1.0)
        rho = np.where(ok, cap / np.maximum(demand, cap), 1.0)
    d_short = t_d <= t_p
    short = np.minimum(t_d, t_p)  # the same values as selecting by d_short
    long_ = np.maximum(t_d, t_p)
    short_new = short / rho
    long_new = long_ + short * (1.0 / rho - 1.0)
    return np.where(d_short, short_new, long_new), np.where(d_short, long_new, short_new)
