"""--dp-size 2 on the CPU with the duet router: every request completes with the tokens of one
replica, both replicas get some, /metrics counts them, /get_load reports both ranks, and the
controller does not spin while idle. Real processes (slow: marked `server`). Every test of
`dp_server` lives here, so that server is up for this module only."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest
import requests

from helpers.reference import prompts

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
        outs = list(ex.map(lambda ids: dp_server.generate(ids, 6, ignore_eos=True), prompts))
    assert all(len(o["output_ids"]) == 6 for o in outs)
    after = _dispatches(dp_server)
    counts = {r: v - before.get(r, 0.0) for r, v in after.items()}
    assert set(counts) == {"0", "1"} and all(v > 0 for v in counts.values()), counts
    assert sum(counts.values()) >= 40
    assert "dispatch by the duet router" in dp_server.log(tail=0)
    rows = requests.get(dp_server.url + "/get_load", timeout=10).json()
    assert sorted(r["dp_rank"] for r in rows) == [0, 1]


def test_dp2_runs_a_duet_scheduler_per_replica(dp_server, duet_server):
    ps = prompts(8, [3, 9, 31, 64, 65, 100, 150, 220], seed=7)  # chunked prefill size is 64
    def run(server):
        with ThreadPoolExecutor(8) as ex:
            return list(ex.map(lambda p: server.generate(p, 6, ignore_eos=True)["output_ids"],
                               ps))

    assert run(dp_server) == run(duet_server)
    log = dp_server.log(tail=0)
    assert re.search(r"DP0\] DuetScheduler:", log) and re.search(r"DP1\] DuetScheduler:", log)


def test_idle_controller_blocks_on_its_socket(dp_server):
    """--sleep-on-idle (a CPU setting): SGLang's controller loop would hold a core at 100%."""
    procs = [p for p in psutil.Process(dp_server.proc.pid).children(recursive=True)
             if "data_parallel_controller" in " ".join(p.cmdline()) + p.name()]
    assert len(procs) == 1, [p.name() for p in procs]
    ctl = procs[0]
    dp_server.generate([5, 6, 7], 2)  # it dispatches, then waits
    before, t0 = sum(ctl.cpu_times()[:2]), time.monotonic()
    time.sleep(3.0)
    used = sum(ctl.cpu_times()[:2]) - before
    assert used < 0.3 * (time.monotonic() - t0), f"{used:.2f} s of CPU in 3 s idle"
    dp_server.generate([5, 6, 7], 2)  # and still dispatches after the wait
