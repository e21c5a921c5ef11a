"""Plan-log lines -> calibration samples: the (q, c) rows and the loop periods."""

from __future__ import annotations

import json

import numpy as np

from benchmark.sim_to_real.samples import (
    BACK_TO_BACK_S,
    WARMUP,
    periods,
    plan_log_samples,
    rebuild_batches,
)


def line(decodes=(), prefill=(), measured=0.1, end=None, mode="aggregated"):
    return {"mode": mode, "decode_rids": list(decodes), "measured_s": measured, "end_s": end,
            "prefill": [{"rid": r, "start": s, "length": n} for r, s, n in prefill]}


def test_rows_follow_the_requests_through_chunks_and_decodes():
    rows = [line(prefill=[("a", 0, 100)]),
            line(prefill=[("a", 100, 20), ("b", 0, 50)]),
            line(decodes=["a", "b"]),
            line(decodes=["a", "b"], prefill=[("c", 0, 7)])]
    b = rebuild_batches(rows)
    assert b[0].q.tolist() == [100] and b[0].c.tolist() == [0] and b[0].sample.tolist() == [False]
    assert b[1].q.tolist() == [20, 50] and b[1].c.tolist() == [100, 0]
    assert b[1].sample.tolist() == [True, True]  # both prompts complete: a token each
    # first decode step: the prompt is cached (120 and 50 tokens), then one more per step
    assert b[2].q.tolist() == [1, 1] and b[2].c.tolist() == [120, 50]
    assert b[3].q.tolist() == [1, 1, 7] and b[3].c.tolist() == [121, 51, 0]


def test_periods_take_back_to_back_gaps_and_the_median_elsewhere():
    rows = [line(measured=0.1, end=10.0), line(measured=0.1, end=10.102),
            line(measured=0.2, end=10.305), line(measured=0.1, end=20.0)]  # waited ~9.6 s
    secs, gap, free = periods(rows)
    assert free == 2 and abs(gap - 0.0025) < 1e-9
    assert np.allclose(secs, [0.1 + gap, 0.102, 0.203, 0.1 + gap])
    assert 20.0 - 10.305 - 0.1 > BACK_TO_BACK_S
    # logs written before `end_s` existed: measured time plus nothing
    assert periods([line(measured=0.3)])[0] == [0.3]


def test_samples_skip_warmup_and_idle_lines(tmp_path):
    log = tmp_path / "plan.tp0.dp0"
    rows = [line(prefill=[(f"r{i}", 0, 10)], end=float(i)) for i in range(WARMUP + 3)]
    rows.insert(2, line(mode="idle"))
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    samples, info = plan_log_samples([log], "h100-sxm", "qwen3-8b")
    assert len(samples) == 3 and info["lines"] == 3
    assert all(s.batch.tokens == 10 and s.seconds > 0 for s in samples)
