"""The server side of the router without a server: SGLang load snapshots as router input, and the
/get_load body the gateway reads."""

from __future__ import annotations

import pytest

pytest.importorskip("sglang")

from sglang.srt.managers.load_snapshot import LoadSnapshot  # noqa: E402

from sglang_duet.latency import LatencyModel, get_hardware, get_model  # noqa: E402
from sglang_duet.router import DuetRouter, RouterContext  # noqa: E402
from sglang_duet.runtime.gateway_load import load_rows  # noqa: E402
from sglang_duet.runtime.router_setup import snapshot_to_load, token_budget  # noqa: E402


def _snap(rank, running=0, used=0, queued=0, t=1.0):
    return LoadSnapshot(timestamp=t, dp_rank=rank, num_running_reqs=running,
                        num_waiting_uncached_tokens=queued, num_used_tokens=used,
                        num_total_tokens=used + queued, max_total_num_tokens=500_000)


def test_snapshot_fields_map_to_replica_load():
    load = snapshot_to_load(_snap(1, running=3, used=900, queued=40, t=7.5))
    assert (load.replica, load.running, load.context_tokens, load.queued_tokens) == (1, 3, 900, 40)
    assert (load.total_tokens, load.capacity_tokens, load.timestamp) == (940, 500_000, 7.5)


def test_token_budget_default():
    class Args:
        chunked_prefill_size = -1

    assert token_budget(Args()) == 8192
    Args.chunked_prefill_size = 2048
    assert token_budget(Args()) == 2048


def test_get_load_rows_rank_busier_replica_higher():
    lm = LatencyModel(get_hardware("h100-sxm"), get_model("qwen3-8b"))
    router = DuetRouter(2, RouterContext(latency=lm, tbt_slo_s=0.1, refresh_s=0.0))
    snaps = [_snap(0), _snap(1, running=128, used=128 * 4000, queued=20_000)]
    rows = load_rows(router, snaps, now=1.0)
    assert [r["dp_rank"] for r in rows] == [0, 1]
    assert 0 < rows[0]["num_tokens"] < rows[1]["num_tokens"]  # integer microseconds
    assert rows[1]["num_tokens"] == round(rows[1]["duet_load_s"] * 1e6)
    assert rows[1]["sglang_num_tokens"] == 128 * 4000 + 20_000
    # a later, lighter report is applied at once (refresh_s = 0)
    rows = load_rows(router, [_snap(0, t=2.0), _snap(1, t=2.0)], now=1.001)
    assert rows[0]["num_tokens"] == rows[1]["num_tokens"]
