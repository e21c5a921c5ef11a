"""Paper reproduction with the trace-driven simulator: ``python -m benchmark.paper``.

Writes PNG figures, ``results.md`` (our numbers next to the paper's) and ``results.json`` under
``benchmark/results/paper/``. See ``experiments.py`` for what runs and ``claims.py`` for what the
DuetServe paper reports.
"""
