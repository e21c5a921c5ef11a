"""Charging py-spy samples to sglang-duet's own code or to the rest."""

from __future__ import annotations

from benchmark.overhead.profile import classify

LOOP = (
    "run (sglang_duet/runtime/process.py:37);"
    "event_loop_normal (sglang_duet/runtime/scheduler.py:185)"
)


def test_classify_innermost_non_stdlib_frame():
    lines = [
        f"{LOOP};run_batch (scheduler.py:3528);forward (torch/nn/modules/module.py:1) 90",
        f"{LOOP};_decide (sglang_duet/runtime/scheduler.py:80);"
        "plan (sglang_duet/policy/policy.py:9) 6",
        f"{LOOP};record (sglang_duet/runtime/metrics.py:51);dumps (json/__init__.py:231) 4",
        "worker_thread (threading.py:1) 50",  # another thread: not counted
    ]
    r = classify(lines)
    assert r["samples"] == 100 and r["duet_samples"] == 10
    assert r["duet_share"] == 0.1
    assert r["top_duet_frames"] == {"plan": 6, "record": 4}
