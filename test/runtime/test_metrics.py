"""The plan log: every executed plan with its measured time, per rank."""

from __future__ import annotations

import json

from sglang_duet.policy import BatchPlan, PrefillChunk
from sglang_duet.runtime.metrics import DuetMetrics


def test_plan_log_has_the_plan_and_what_was_measured(tmp_path):
    m = DuetMetrics(False, {"tp_rank": "1", "dp_rank": "0"}, str(tmp_path / "plan"))
    plan = BatchPlan.spatial(("a",), (PrefillChunk("w", 0, 64),), 32, 100, 4, 0.01, 0.03)
    m.record(plan, 0.05, tbt_slo_s=0.1, discarded=2, rank=1, decode_steps=1, limited="flashinfer")
    m.record(BatchPlan.decode_only(("a",), 132, 0.01), 0.012, 0.1, 0, 1)
    lines = [json.loads(x) for x in (tmp_path / "plan.tp1.dp0").read_text().splitlines()]
    assert lines[0]["mode"] == "spatial" and lines[0]["lookahead"] == 4
    assert (lines[0]["measured_s"], lines[0]["decode_steps"]) == (0.05, 1)
    assert lines[0]["lookahead_limited"] == "flashinfer"
    assert lines[1]["mode"] == "decode_only" and lines[1]["lookahead_limited"] == ""
    assert m.lookahead_limited == {"flashinfer": 1} and m.discarded == 2
