"""The phases_gpu step's answer: are green contexts usable (benchmark/gpu/answers.py)?"""

from __future__ import annotations

import json

from benchmark.gpu.answers import main, phases_answer


def test_device_events_mean_usable():
    a = phases_answer("..\nphases join: device events\n.")
    assert a["join"] == "device events" and a["green_ctx_usable"] is True


def test_host_sync_means_unusable_and_says_what_to_do():
    a = phases_answer("phases join: host sync\n")
    assert a["green_ctx_usable"] is False and "--duet-partition-backend none" in a["answer"]


def test_no_answer_when_the_test_did_not_print(tmp_path):
    assert phases_answer("4 errors")["green_ctx_usable"] is None
    out = tmp_path / "a.json"
    assert main(["phases", str(tmp_path / "absent.log"), str(out)]) == 2
    assert json.loads(out.read_text())["join"] is None


def test_exit_status_follows_the_answer(tmp_path):
    log = tmp_path / "p.log"
    log.write_text("phases join: host sync\n")
    assert main(["phases", str(log), str(tmp_path / "a.json")]) == 1
    log.write_text("phases join: device events\n")
    assert main(["phases", str(log), str(tmp_path / "a.json")]) == 0
