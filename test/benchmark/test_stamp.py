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


RESULTS = ROOT / "benchmark" / "results"
STAMP_KEYS = {"commit", "date", "machine", "command"}
# Committed before every writer went through write_result, and too long to rerun on the shared CPU
# machine in passing: result -> what it costs. Rerunning the benchmark restamps it; then drop it.
OLD_FORMAT: dict[str, str] = {}

# Inputs a result was computed from, in the simulator's own plain formats (a stamp key would not
# load): benchmark.sim_to_real's fitted CPU hardware profile (latency.get_hardware), its
# calibrations (Calibration.load) and the model's config (ModelSpec.from_hf_config), which its
# stamped cpu.json names and `--reuse` reads back.
INPUTS = ("sim_to_real/*_hardware.json", "sim_to_real/*_calibration*.json",
          "sim_to_real/*_model.json")


def _input(rel: str) -> bool:
    import fnmatch

    return any(fnmatch.fnmatch(rel, pat) for pat in INPUTS)


def _unstamped(path) -> str | None:
    """Why the result at `path` is not a write_result JSON, or None when it is."""
    try:
        body = json.loads(path.read_text())
    except ValueError as e:
        return f"not JSON ({e})"
    if not isinstance(body, dict) or not isinstance(body.get("stamp"), dict):
        return "no stamp"
    if set(body["stamp"]) != STAMP_KEYS:
        return f"stamp keys {sorted(body['stamp'])}"
    return None if list(body)[0] == "stamp" else "stamp not first"


def test_unstamped_finder(tmp_path):
    good = write_result(tmp_path / "g.json", {"x": 1}, argv=["prog"])
    (tmp_path / "old.json").write_text('{"config": {}, "results": []}')
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "half.json").write_text('{"stamp": {"commit": "abc"}}')
    assert _unstamped(good) is None
    assert _unstamped(tmp_path / "old.json") == _unstamped(tmp_path / "list.json") == "no stamp"
    assert _unstamped(tmp_path / "half.json") == "stamp keys ['commit']"


def test_every_committed_result_is_stamped():
    """Each JSON under benchmark/results/ came from benchmark.stamp.write_result."""
    found = sorted(p.relative_to(RESULTS).as_posix() for p in RESULTS.rglob("*.json"))
    assert found, "no results found"
    bad = {rel: why for rel in found if rel not in OLD_FORMAT and not _input(rel)
           if (why := _unstamped(RESULTS / rel))}
    assert not bad, f"results not written by benchmark.stamp.write_result: {bad}"
    for rel in OLD_FORMAT:  # the exceptions are real and still old: rerun ones leave the list
        assert rel in found and _unstamped(RESULTS / rel), f"{rel}: drop it from OLD_FORMAT"


def test_input_profiles_load_and_are_named_by_a_stamped_result():
    """Each unstamped input is one the simulator loads, named by the stamped result beside it."""
    from sglang_duet.latency import Calibration, get_hardware

    inputs = [p for p in RESULTS.rglob("*.json") if _input(p.relative_to(RESULTS).as_posix())]
    for p in inputs:
        if "_hardware" in p.name:
            get_hardware(str(p))
        elif "_calibration" in p.name:
            Calibration.load(str(p))
        stamped = [q for q in p.parent.glob("*.json")
                   if not _input(q.relative_to(RESULTS).as_posix())]
        assert any(p.name in q.read_text() for q in stamped), f"{p}: no stamped result names it"


def test_a_changed_result_is_not_dirty_changed_code_is(tmp_path, monkeypatch):
    import subprocess

    import benchmark.stamp as st

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    (tmp_path / "benchmark" / "results").mkdir(parents=True)
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "benchmark" / "results" / "r.json").write_text("{}\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    monkeypatch.setattr(st, "ROOT", tmp_path)
    assert not st.stamp([])["commit"].endswith("-dirty")
    (tmp_path / "benchmark" / "results" / "r.json").write_text('{"a": 1}\n')
    assert not st.stamp([])["commit"].endswith("-dirty")
    (tmp_path / "code.py").write_text("x = 2\n")
    assert st.stamp([])["commit"].endswith("-dirty")
