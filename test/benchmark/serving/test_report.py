"""Metrics reduction and the comparison table, on hand-made bench_serving results."""

from __future__ import annotations

import os

from benchmark.serving import report
from benchmark.serving.metrics import slo_attainment, summarize

RESULT = {
    "completed": 3, "output_throughput": 100.0, "request_throughput": 1.5,
    "median_ttft_ms": 50.0, "p99_ttft_ms": 90.0, "median_itl_ms": 10.0, "p99_itl_ms": 40.0,
    "ttfts": [0.05, 0.09, 3.0, 0.0], "itls": [[0.01, 0.02], [0.2], [0.01], []],
    "errors": [None, None, None, "boom"],
}


def test_slo_attainment_counts_ttft_tbt_and_failures():
    # request 1 ok; 2 misses TBT (200 ms); 3 misses TTFT (3 s); 4 failed
    assert slo_attainment(RESULT, ttft_slo_ms=1000, tbt_slo_ms=100) == 0.25
    assert slo_attainment(RESULT, ttft_slo_ms=5000, tbt_slo_ms=300) == 0.75


def test_summarize_and_table(tmp_path):
    s = summarize(RESULT, requests=4, ttft_slo_ms=1000, tbt_slo_ms=100)
    assert s["failed"] == 1 and s["max_itl_ms"] == 200.0 and s["requests"] == 4
    results = {
        "config": {"trace": "azure_conv", "ttft_slo_ms": 1000, "tbt_slo_ms": 100},
        "systems": {
            "duet": {"status": "ran", "reason": None, "runs": [{"qps": 1.0, "summary": s}]},
            "sglang-pdmux": {"status": "skipped", "reason": "needs a CUDA GPU", "runs": []},
        },
    }
    text = report.table(results)
    assert "| duet | 1.0 | 3/4 | 100.0 |" in text
    assert "sglang-pdmux: skipped — needs a CUDA GPU" in text
    paths = report.plots(results, str(tmp_path / "x"))
    assert len(paths) == 3 and all(os.path.getsize(p) > 0 for p in paths)
