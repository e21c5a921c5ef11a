"""What bounds the longest first-token wait: the window's statistics, the ideal server in each
order, and the report a short run writes."""

from __future__ import annotations

import json

import numpy as np

from benchmark.capacity.max_ttft import ORDERS, ideal_waits, main, waits
from benchmark.capacity.queue_bound import FcfsQueue
from sglang_duet.sim import SimConfig


def test_waits_are_the_windows_share_p99_and_max():
    n = 100  # the window is requests 10-89 (`sim.steady.window_bounds`)
    arrival = np.arange(n, dtype=float)
    first = arrival + np.where(np.arange(n) % 4 == 0, 12.0, 2.0)
    first[5] = arrival[5] + 99.0  # outside the window: not counted
    got = waits(arrival, first, 10.0)
    assert got == {"attainment": 0.75, "p99_s": 12.0, "max_s": 12.0}


def test_ideal_server_orders_on_one_overloaded_gpu():
    """On one server, arrival order (earliest deadline first under one offset) gives the least
    largest wait of any order (Jackson's rule); here the predictive orders meet more of the SLO
    by making the long prompts wait."""
    cfg = SimConfig(trace="mooncake", gpus=1, tp=1)
    queue = FcfsQueue(cfg, 300)
    rows = {o: ideal_waits(queue, 1.2, 0.8, o, 3.0) for o in ORDERS}
    for r in rows.values():
        assert 0.0 <= r["attainment"] <= 1.0 and r["p99_s"] <= r["max_s"]
    assert rows["fcfs"]["max_s"] <= min(rows["deadline"]["max_s"], rows["sjf"]["max_s"])
    assert rows["deadline"]["attainment"] >= rows["fcfs"]["attainment"]


def test_main_writes_the_table(tmp_path):
    assert main(["--cases", "mooncake-qwen3-8b-tp1", "--requests", "200", "--jobs", "1",
                 "--dest", str(tmp_path)]) == 0
    got = json.loads((tmp_path / "max_ttft.json").read_text())
    (row,) = got["cases"]
    assert row["case"] == "mooncake-qwen3-8b-tp1" and row["requests"] == 200
    assert set(row["ideal"]) == set(ORDERS) and row["aging_bound_s"] == 30.0
    assert 0.0 < row["speed"] <= 1.0
    assert "| mooncake-qwen3-8b-tp1 |" in (tmp_path / "max_ttft.md").read_text()
