"""`best_gap_split` for a short menu, entry by entry in Python floats: the fenced fast path.

The runtime's green-context menu has 6 entries (8-SM steps would give about 16); there numpy's
per-call overhead (about 25 array operations on 6 numbers) costs more than the arithmetic. This
loop evaluates the same IEEE double expressions in the same order as the vectorised
`gap_optimizer.best_gap_split`, so it returns the same ``(index, k, objective)``, bit for bit:
test/policy/test_small_menu.py holds them equal on random tables. Times are seconds.
"""

from __future__ import annotations

from math import ceil, floor

__all__ = ["EPS", "SMALL_MENU", "best_gap_split_small"]

SMALL_MENU = 24  # menu entries up to which the loop beats numpy on this machine's CPUs
EPS = 1e-12  # seconds of slack in every feasibility test of the split search (both paths)


def best_gap_split_small(
    t_d: list[float], t_p: list[float], n_d: int, n_p: int, tau: float, carry: float,
    k_max: int, k_done: int, step_tau: float | None = None, t_alone: float = 0.0,
    decode_weight: float = 1.0,
) -> tuple[int, int, float] | None:
    """`gap_optimizer.best_gap_split` over lists (its docstring has the arguments), for the
    inputs the policy passes: finite times with every ``t_d > 0``, ``k_max, k_done >= 1`` and
    ``decode_weight >= 0`` (numpy would skip a non-finite entry; this raises on it)."""
    k_cap = float(min(k_max, k_done))
    done = float(k_done) if k_done <= k_max else None
    tau_ok = tau + EPS
    step_ok = step_tau + EPS if step_tau is not None and step_tau < tau else None
    w = decode_weight * n_d
    best: tuple[int, float, float] | None = None
    for i, (td, tp) in enumerate(zip(t_d, t_p, strict=True)):
        if td + carry > tau_ok or (step_ok is not None and td > step_ok):
            continue
        over = t_alone - td  # min_lookahead: the step after the boundary may be t_alone
        k_lo = ceil((tp - tau + (over if over > 0.0 else 0.0)) / td - 1e-9) + 1.0
        if k_lo < 1.0:
            k_lo = 1.0
        if done is not None and done < k_lo:
            k_lo = done
        if k_lo > k_cap:
            continue
        k1 = min(max(float(floor(tp / td)), k_lo), k_cap)  # np.clip(x, lo, hi)
        k2 = min(k1 + 1.0, k_cap)
        o1 = (k1 * w + n_p) / max(k1 * td, tp)
        o2 = (k2 * w + n_p) / max(k2 * td, tp)
        k, o = (k2, o2) if o2 > o1 else (k1, o1)
        if best is None or o > best[2]:  # the first maximum: fewest decode SMs
            best = (i, k, o)
    return None if best is None else (best[0], int(best[1]), best[2])
