"""The fast path: `reference.py`'s arithmetic rearranged for the planner's 100 us budget.

Everything in this package exists only because `DuetPolicy.plan()` scores an SM menu every
iteration within about 100 us (`benchmark/policy/decision_cost.py`), and the simulator predicts
millions of iterations. Nothing here changes a prediction: the property tests
(`test/latency/test_fast.py`) hold `LatencyModel.predict` to `reference.predict`, and the
menu-wide `predict_concurrent_table` (numpy over the menu) and its entry-by-entry twin for
short menus, `predict_concurrent_lists` (the runtime's 6 green-context entries, where numpy's
per-call overhead costs more than the arithmetic), to `predict` bit for bit. Each trick was
kept only where the decision-cost benchmark showed it pays (see `benchmark/results/policy/` and
`benchmark/results/ab/`). `rows`: a batch's attention rows as exact integer sums; `attention`:
one kernel's attention without a loop over rows; `tables`: per-SM-count rates, per-batch
preparation, and their evaluation over a tuple of SM counts at once.
"""

from .tables import Prepared, Rates, SmTable, check_pair, check_pairs, row_sum

__all__ = ["Prepared", "Rates", "SmTable", "check_pair", "check_pairs", "row_sum"]
