"""DuetMetrics without a server: the plan log with what was measured; every documented series
exported from start-up at 0, mode switches at INFO and the rest at DEBUG, a periodic summary
line (#16 item 9)."""

from __future__ import annotations

import json
import logging
import re

from sglang_duet.policy import BatchPlan, PrefillChunk
from sglang_duet.runtime.metrics import SUMMARY_S, DuetMetrics


def plan(mode: str) -> BatchPlan:
    return BatchPlan(mode=mode, decode_rids=("a",) if mode != "idle" else (), prefill=(),
                     sms_decode=8, sms_prefill=8, lookahead=1, predicted_total_s=0.001,
                     predicted_decode_s=0.001, predicted_prefill_s=0.0, reason="test")


def test_documented_series_exist_at_zero():
    from prometheus_client import REGISTRY, generate_latest

    DuetMetrics(True, {"tp_rank": "0", "dp_rank": "0"})
    text = generate_latest(REGISTRY).decode()
    doc = DuetMetrics.__doc__
    for name in ("predicted_tbt_slo_misses_total", "lookahead_tokens_discarded_total"):
        assert name in doc
        assert re.search(rf'^sglang_duet:{name}\{{.*\}} 0\.0$', text, re.M), name
    assert re.search(r'^sglang_duet:iterations_total\{.*mode="spatial".*\} 0\.0$', text, re.M)


def test_switches_info_rest_debug_and_summary(caplog):
    now = [0.0]
    m = DuetMetrics(False, {"tp_rank": "0", "dp_rank": "0"}, clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger="sglang_duet.plan")
    for mode in ["aggregated", "decode_only", "idle", "aggregated", "decode_only",
                 "spatial", "decode_only", "aggregated", "spatial"]:
        m.record(plan(mode), 0.001, 0.1, 0, rank=0)
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    modes = [re.search(r'"mode": "(\w+)"', x).group(1) for x in info]
    assert modes == ["aggregated", "spatial", "decode_only", "spatial"]
    assert len(debug) == 5  # every other change of plan kind
    caplog.clear()
    now[0] = SUMMARY_S + 1
    m.record(plan("aggregated"), 0.001, 0.1, 2, rank=0)
    summary = [r.getMessage() for r in caplog.records if "summary" in r.getMessage()]
    assert len(summary) == 1 and '"spatial": 2' in summary[0]
    assert '"lookahead_discarded": 2' in summary[0]


def test_plan_log_has_the_plan_and_what_was_measured(tmp_path):
    m = DuetMetrics(False, {"tp_rank": "1", "dp_rank": "0"}, str(tmp_path / "plan"))
    plan = BatchPlan.spatial(("a",), (PrefillChunk("w", 0, 64),), 32, 100, 4, 0.01, 0.03)
    m.record(plan, 0.05, tbt_slo_s=0.1, discarded=2, rank=1, decode_steps=1, limited="flashinfer")
    m.record(BatchPlan.decode_only(("a",), 132, 0.01), 0.012, 0.1, 0, 1)
    lines = [json.loads(x) for x in (tmp_path / "plan.tp1.dp0").read_text().splitlines()]
    assert lines[0]["mode"] == "spatial" and lines[0]["lookahead"] == 4
    assert (lines[0]["measured_s"], lines[0]["decode_steps"], lines[0]["discarded"]) == (
        0.05, 1, 2)
    assert lines[0]["lookahead_limited"] == "flashinfer"
    assert lines[1]["mode"] == "decode_only" and lines[1]["lookahead_limited"] == ""
    assert m.lookahead_limited == {"flashinfer": 1} and m.discarded == 2
