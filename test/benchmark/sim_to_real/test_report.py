"""Sim/real rows, the targets and the verdict."""

from __future__ import annotations

from benchmark.sim_to_real import report


def metrics(ttft, tbt, rps):
    return {"ttft_p50_ms": ttft, "ttft_p99_ms": 2 * ttft, "tbt_p50_ms": tbt,
            "tbt_p99_ms": 3 * tbt, "throughput_rps": rps}


def test_ratios_targets_and_saturation():
    real = [{"qps": 1.0, "metrics": metrics(100.0, 10.0, 1.0), "cpu": {"others_cores": 0.2}},
            {"qps": 4.0, "metrics": metrics(1000.0, 50.0, 2.0), "cpu": {}}]
    sim = {1.0: metrics(120.0, 13.0, 1.0), 4.0: metrics(700.0, 50.0, 2.2)}
    rows = report.compare_runs(real, sim, {"plain": {1.0: metrics(100.0, 10.0, 1.0),
                                                     4.0: metrics(1000.0, 50.0, 2.0)}})
    by = {(r["qps"], r["metric"]): r for r in rows}
    assert by[1.0, "ttft_p50_ms"]["ratio"] == 1.2 and by[1.0, "ttft_p50_ms"]["ok"]
    assert by[1.0, "tbt_p50_ms"]["ratio"] == 1.3 and by[1.0, "tbt_p50_ms"]["ok"] is False
    # throughput is a target only at the last point when it is overloaded (2 of 4 offered)
    assert by[1.0, "throughput_rps"]["ok"] is None and by[1.0, "throughput_rps"]["target"] is None
    assert by[4.0, "throughput_rps"]["ratio"] == 1.1 and by[4.0, "throughput_rps"]["ok"]
    assert by[4.0, "ttft_p50_ms"]["ok"] is False and by[4.0, "ttft_p50_ms"]["ratio_plain"] == 1.0
    assert by[1.0, "ttft_p50_ms"]["others_cores"] == 0.2
    results = {"systems": {"s": {"comparison": rows}, "t": {"status": "failed", "reason": "x"}}}
    v = report.verdict(results)
    assert v["per_system"]["s"] == {"met": 5, "targeted": 9} and v["all"]["targeted"] == 9
    md = report.table(results)
    assert "no overlap rule |" in md
    assert "| 4 | throughput_rps | 2 | 2.2 | 1.1 | 1 | +-15% | yes |" in md
    assert "not compared: failed x" in md


def test_ratio_needs_both_sides():
    assert report.ratio(None, 1.0) is None and report.ratio(1.0, 0.0) is None
