"""Every committed result carries commit, date, machine and command, and no temporary path."""

from __future__ import annotations

import json

import numpy as np

from benchmark.stamp import ROOT, stamp, write_result


def test_stamp_fields():
    s = stamp(["benchmark/sim/speed.py", "--trace", "azure-code"])
    assert set(s) == {"commit", "date", "machine", "command"}
    assert s["machine"]["cores"] >= 1 and s["machine"]["cpu"]
    assert s["date"].endswith("+00:00")


def test_script_path_becomes_module_command():
    s = stamp([str(ROOT / "benchmark" / "sim" / "speed.py"), "--x", "1"])
    assert s["command"] == "python -m benchmark.sim.speed --x 1"
    s = stamp([str(ROOT / "benchmark" / "capacity" / "__main__.py")])
    assert s["command"] == "python -m benchmark.capacity"


def test_write_result_keeps_payload_and_serialises_numpy(tmp_path):
    out = write_result(tmp_path / "a" / "r.json", {"x": np.float64(1.5), "v": np.arange(3)},
                       argv=["prog"])
    body = json.loads(out.read_text())
    assert list(body) == ["stamp", "x", "v"]
    assert body["x"] == 1.5 and body["v"] == [0, 1, 2]
    assert str(tmp_path) not in json.dumps(body["stamp"])
