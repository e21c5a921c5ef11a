"""The README's capacity table is the committed capacity results, not figures typed once."""

from __future__ import annotations

import json
import re

from benchmark.stamp import ROOT

ROWS = {"Qwen3-8B": "qwen3-8b-tp1", "Qwen3-14B TP=2": "qwen3-14b-tp2"}
AGGREGATED = ("vllm-chunked", "sglang-chunked", "sglang-default")


def _table() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Capacity (simulated)", 1)[1].split("\n## ", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| ")]


def test_readme_capacities_equal_the_results_json():
    header, *rows = _table()
    assert header[1:] == ["duet", "duet-paper", "best chunked/default", "sglang-pdmux",
                          "dynamo"]
    body = [r for r in rows if not re.fullmatch(r"-+:?", r[1])]
    assert len(body) == 6
    for row in body:
        trace, model = (s.strip() for s in row[0].split(",", 1))
        result = json.loads((ROOT / "benchmark" / "results" / "capacity"
                             / f"{trace}-{ROWS[model]}.json").read_text())
        cap = {p: v["capacity_qps"] for p, v in result["policies"].items()}
        want = [cap["duet"], cap["duet-paper"], max(cap[p] for p in AGGREGATED),
                cap["sglang-pdmux"], cap["dynamo"]]
        shown = [float(x) for x in row[1:]]  # two decimals at most (0.625 may read 0.63)
        assert all(abs(s - w) <= 0.005 + 1e-9 for s, w in zip(shown, want, strict=True)), (
            row[0], shown, want)
