"""check.sh folds each step into its stage JSON at once: earlier steps survive later ones."""

from __future__ import annotations

import json

from benchmark.gpu.collect import fold, main


def test_steps_accumulate_and_ok_follows_every_rc(tmp_path):
    stage = tmp_path / "stage1.json"
    raw = tmp_path / "sm_scaling.json"
    raw.write_text(json.dumps({"rows": [1, 2]}))
    log = tmp_path / "x.log"
    log.write_text("a" * 5000 + "END")
    fold(stage, "sm_scaling", 0, 12.0, [raw, log, tmp_path / "absent.json"])
    body = json.loads(stage.read_text())
    assert body["ok"] is True and "stamp" in body
    files = body["steps"]["sm_scaling"]["files"]
    assert files["sm_scaling.json"] == {"rows": [1, 2]}
    assert files["x.log"].endswith("END") and len(files["x.log"]) == 4000
    assert files["absent.json"] is None
    assert main([str(stage), "concurrent_check", "124", "80"]) == 0
    body = json.loads(stage.read_text())
    assert set(body["steps"]) == {"sm_scaling", "concurrent_check"}
    assert body["ok"] is False and body["steps"]["concurrent_check"]["rc"] == 124


def test_a_skipped_step_is_not_ok(tmp_path):
    stage = tmp_path / "stage2.json"
    assert main([str(stage), "serving_check", "null", "0"]) == 0
    body = json.loads(stage.read_text())
    assert body["steps"]["serving_check"]["rc"] is None and body["ok"] is False


def test_summary_is_stamped_and_ok_only_when_every_stage_is(tmp_path):
    assert main(["--summary", str(tmp_path), "all", "12"]) == 1  # no stage JSON at all
    fold(tmp_path / "stage1.json", "sm_scaling", 0, 1.0, [])
    assert main(["--summary", str(tmp_path), "1", "12"]) == 0
    body = json.loads((tmp_path / "summary.json").read_text())
    assert body["ok"] is True and body["stages"] == "1" and body["wall_s"] == 12.0
    assert set(body["stamp"]) == {"commit", "date", "machine", "command"}
    fold(tmp_path / "stage2.json", "serving_check", 1, 1.0, [])
    assert main(["--summary", str(tmp_path), "all", "30"]) == 1
    assert json.loads((tmp_path / "summary.json").read_text())["ok"] is False
