"""Capacity benchmark: per policy, SLO attainment vs Poisson QPS on the simulator and the highest
QPS at which >= 90% of requests meet both SLOs (``python -m benchmark.capacity``)."""
