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
