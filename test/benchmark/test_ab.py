"""``python -m benchmark.ab`` times two commits side by side and cleans up its worktrees."""

from __future__ import annotations

import json
import subprocess

from benchmark import ab
from benchmark.stamp import ROOT


def _worktrees() -> int:
    out = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True,
                         text=True, check=True)
    return len(out.stdout.splitlines())


def test_two_refs_one_round(tmp_path, capsys):
    before = _worktrees()
    out = tmp_path / "ab.json"
    assert ab.main(["--refs", "HEAD", "HEAD~0", "--rounds", "1", "--iters", "3",
                    "--sim-rounds", "0", "--out", str(out)]) == 0
    body = json.loads(out.read_text())
    assert "stamp" in body and body["rounds"] == 1
    assert body["refs"]["HEAD"] == body["refs"]["HEAD~0"]  # one commit, two worktrees
    best = body["plan_median_us_best"]
    assert set(best["HEAD"]) == set(best["HEAD~0"]) and len(best["HEAD"]) >= 6
    for case, us in best["HEAD~0"].items():
        assert us > 0 and body["plan_ratio_to_first"]["HEAD~0"][case] == round(
            us / best["HEAD"][case], 3)
    assert _worktrees() == before


def test_needs_two_distinct_refs(capsys):
    try:
        ab.main(["--refs", "HEAD", "HEAD"])
    except SystemExit as e:
        assert e.code == 2
    else:
        raise AssertionError("one ref was accepted")


def test_refs_are_resolved_before_the_run(monkeypatch):
    """Each ref is resolved before its checkout: a ref that moves while the rounds run (a
    commit made meanwhile) is reported as the commit that was checked out and timed."""
    timed, moved = [], []
    real_commit = ab._commit

    def fake_run(tree, module, out, *args):
        timed.append(subprocess.run(["git", "-C", str(tree), "rev-parse", "--short=12", "HEAD"],
                                    capture_output=True, text=True, check=True).stdout.strip())
        moved.append(True)  # from now on the refs point at HEAD's parent
        return {"medians_us": {"case": 1.0}}

    monkeypatch.setattr(ab, "_run", fake_run)
    monkeypatch.setattr(ab, "_commit", lambda ref: real_commit(f"{ref}~1" if moved else ref))
    result = ab.compare(["HEAD", "HEAD~0"], 1, 1, 0)
    assert list(result["refs"].values()) == timed == [real_commit("HEAD")] * 2
