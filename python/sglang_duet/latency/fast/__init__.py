"""The fast path: `reference.py`'s arithmetic rearranged for the planner's 100 us budget.

Everything in this package exists only because `DuetPolicy.plan()` scores a whole SM menu
(~65 partition pairs) every iteration within about 100 us (`benchmark/policy/decision_cost.py`),
and the simulator predicts millions of iterations. Nothing here changes a prediction: the
property tests (`test/latency/test_fast.py`) hold `LatencyModel.predict` to `reference.predict`,
and the menu-wide `predict_concurrent_table` to `predict` bit for bit. Each trick was kept only
where the decision-cost benchmark showed it pays (see `benchmark/results/policy/`). The tricks:

* `rows`: a batch's attention rows as exact integer sums (so a batch predicts the same however
  it was assembled), built in Python below `SMALL` rows and `PY_STATS` decodes, where numpy's
  per-call overhead costs more than the loop.
* `attention.AttnRows`: one kernel's attention without a loop over rows (extreme ratios, and a
  sorted compute/memory split only when a calibration puts the boundary inside the rows).
* `tables.Rates`: per SM count, every operator's seconds per token with the efficiencies folded
  in, so a token-level operator costs ``max(kf * T, kb * T + kw)``; memoised per (tokens, rows),
  which repeat from one iteration to the next.
* `tables.Prepared`: what one model derives from one batch once (kept in `Batch.memo`).
* `tables.SmTable`: the rates of a tuple of SM counts as (operators x SM counts) arrays; the
  vectorised evaluation repeats the scalar one's floating-point operations elementwise, in the
  same order.
"""

from .tables import Prepared, Rates, SmTable, check_pair, check_pairs, row_sum

__all__ = ["Prepared", "Rates", "SmTable", "check_pair", "check_pairs", "row_sum"]
