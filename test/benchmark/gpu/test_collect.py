"""check.sh folds each step into its stage JSON at once: earlier steps survive later ones; each
step has its own verdict, and a skipped step is neither passed nor failed."""

from __future__ import annotations

import json

from benchmark.gpu.collect import fold, main, stage_verdict, verdict


def test_steps_accumulate_and_ok_follows_every_rc(tmp_path):
    stage = tmp_path / "stage1.json"
    raw = tmp_path / "sm_scaling.json"
    raw.write_text(json.dumps({"rows": [1, 2]}))
    log = tmp_path / "x.log"
    log.write_text("a" * 5000 + "END")
    fold(stage, "sm_scaling", 0, 12.0, [raw, log, tmp_path / "absent.json"], cap_s=40)
    body = json.loads(stage.read_text())
    assert body["ok"] is True and body["complete"] is True and "stamp" in body
    entry = body["steps"]["sm_scaling"]
    assert entry["verdict"] == "passed" and entry["cap_s"] == 40 and entry["required"]
    files = entry["files"]
    assert files["sm_scaling.json"] == {"rows": [1, 2]}
    assert files["x.log"].endswith("END") and len(files["x.log"]) == 4000
    assert files["absent.json"] is None
    assert main([str(stage), "concurrent_check", "124", "80", "--cap", "80"]) == 0
    body = json.loads(stage.read_text())
    assert set(body["steps"]) == {"sm_scaling", "concurrent_check"}
    assert body["ok"] is False and body["steps"]["concurrent_check"]["rc"] == 124
    assert body["steps"]["concurrent_check"]["verdict"] == "timed_out"
    assert body["verdicts"]["timed_out"] == ["concurrent_check"]


def test_verdicts():
    assert verdict(0, None) == "passed"
    assert verdict(1, None) == verdict(2, None) == "failed"
    assert verdict(124, None) == verdict(137, None) == "timed_out"
    assert verdict(None, None) == verdict(0, "no CUDA device") == "skipped"


def test_a_skipped_optional_step_leaves_the_stage_ok(tmp_path):
    stage = tmp_path / "stage1.json"
    fold(stage, "phases_gpu", 0, 3.0, [], cap_s=30)
    assert main([str(stage), "sm_scaling", "null", "0", "--cap", "40", "--optional",
                 "--skip", "stage time spent"]) == 0
    body = json.loads(stage.read_text())
    step = body["steps"]["sm_scaling"]
    assert step["verdict"] == "skipped" and step["skip_reason"] == "stage time spent"
    assert not step["required"] and body["ok"] is True and body["complete"] is True
    assert body["verdicts"] == {"passed": ["phases_gpu"], "failed": [], "timed_out": [],
                                "skipped": ["sm_scaling"]}


def test_a_skipped_required_step_is_neither_ok_nor_failed(tmp_path):
    stage = tmp_path / "stage2.json"
    fold(stage, "imports", 0, 3.0, [])
    assert main([str(stage), "serving", "null", "0", "--skip", "stage time spent"]) == 0
    body = json.loads(stage.read_text())
    assert body["steps"]["serving"]["rc"] is None
    assert body["ok"] is None and body["complete"] is False
    # ... and a failure elsewhere still fails the stage
    fold(stage, "warmup", 1, 3.0, [])
    assert json.loads(stage.read_text())["ok"] is False


def test_stage_verdict_with_nothing_run_is_not_ok():
    steps = {"a": {"verdict": "skipped", "required": True}}
    assert stage_verdict(steps)["ok"] is None
    steps = {"a": {"verdict": "skipped", "required": False}}
    assert stage_verdict(steps)["ok"] is False  # nothing passed: nothing to call ok


def test_summary_is_stamped_and_ok_only_when_every_stage_is(tmp_path):
    assert main(["--summary", str(tmp_path), "all", "12"]) == 1  # no stage JSON at all
    fold(tmp_path / "stage1.json", "sm_scaling", 0, 1.0, [])
    assert main(["--summary", str(tmp_path), "1", "12"]) == 0
    body = json.loads((tmp_path / "summary.json").read_text())
    assert body["ok"] is True and body["stages"] == "1" and body["wall_s"] == 12.0
    assert body["dry_run"] is False and body["plan"]["fits"] is True
    assert set(body["stamp"]) == {"commit", "date", "machine", "command"}
    fold(tmp_path / "stage2.json", "serving", 1, 1.0, [])
    assert main(["--summary", str(tmp_path), "all", "30"]) == 1
    assert json.loads((tmp_path / "summary.json").read_text())["ok"] is False


def test_summary_of_a_dry_run(tmp_path):
    fold(tmp_path / "stage1.json", "phases_gpu", None, 0.0, [], skipped="no CUDA device")
    assert main(["--summary", str(tmp_path), "all", "2"]) == 0
    body = json.loads((tmp_path / "summary.json").read_text())
    assert body["dry_run"] is True and body["ok"] is None
