"""``python -m benchmark.paper --quick`` writes every figure and the table (tiny workloads)."""

from __future__ import annotations

import json
import os

from benchmark.paper.__main__ import main


def test_quick_run_writes_everything(tmp_path):
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    names = set(os.listdir(tmp_path))
    assert {"results.md", "results.json", "obs3_agg_vs_disagg.png"} <= names
    assert sum(n.startswith("e2e_") and n.endswith(".png") for n in names) == 4
    md = (tmp_path / "results.md").read_text()
    assert "paper: 13.57 req/s" in md and "Quick (smoke-test) run" in md
    body = json.loads((tmp_path / "results.json").read_text())
    assert list(body)[:2] == ["stamp", "obs3"] and body["quick"] is True  # benchmark.stamp
