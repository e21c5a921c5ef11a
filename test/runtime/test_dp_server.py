"""--dp-size 2 on the CPU with the duet router: every request completes, both replicas get some,
/metrics counts them, /get_load reports both ranks. Real processes (slow: marked `server`)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

pytestmark = pytest.mark.server


def _dispatches(server) -> dict[str, float]:
    text = requests.get(server.url + "/metrics", timeout=10).text
    return {m[0]: float(m[1]) for m in re.findall(
        r'^sglang_duet:router_dispatches_total\{replica="(\d)"\} (\S+)', text, re.M)}


def test_duet_dispatch_spreads_and_counts(dp_server):
    """`dp_server` (conftest) is shared: the counts are this test's increments."""
    before = _dispatches(dp_server)
    prompts = [[(3 * i + j) % 400 + 5 for j in range(10 + 7 * (i % 9))] for i in range(40)]
    with ThreadPoolExecutor(40) as ex:
        outs = list(ex.map(lambda ids: dp_server.generate(ids, 6), prompts))
    assert all(len(o["output_ids"]) == 6 for o in outs)
    after = _dispatches(dp_server)
    counts = {r: v - before.get(r, 0.0) for r, v in after.items()}
    assert set(counts) == {"0", "1"} and all(v > 0 for v in counts.values()), counts
    assert sum(counts.values()) >= 40
    assert "dispatch by the duet router" in dp_server.log(tail=0)
    rows = requests.get(dp_server.url + "/get_load", timeout=10).json()
    assert sorted(r["dp_rank"] for r in rows) == [0, 1]
