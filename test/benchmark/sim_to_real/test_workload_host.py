"""The replayed requests (same lengths and arrivals on both sides) and the host-share probe."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmark.sim_to_real.host import host_shares
from benchmark.sim_to_real.samples import WARMUP
from benchmark.sim_to_real.workload import LoadPoint, build_point, to_workload


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    from sglang_duet.tiny_model import default_model_path

    return AutoTokenizer.from_pretrained(str(default_model_path()))


def test_points_share_one_draw_and_carry_their_arrivals(tok):
    a, _ = build_point(LoadPoint(1.0, 6), tok, 0.1, 4096, 0, pool=10)
    b, _ = build_point(LoadPoint(3.0, 10), tok, 0.1, 4096, 0, pool=10)
    assert [r.prompt_len for r in a] == [r.prompt_len for r in b[:6]]
    assert [r.output_len for r in a] == [r.output_len for r in b[:6]]
    assert a[0].timestamp_ms == 0.0 and all(r.output_len >= 2 for r in b)
    from sglang_duet.sim.arrivals import poisson_times

    # the simulator's own Poisson rule, so a simulation sees the very same arrivals
    assert [r.timestamp_ms / 1e3 for r in b] == pytest.approx(poisson_times(10, 3.0).tolist())
    assert a[1].timestamp_ms == pytest.approx(3.0 * b[1].timestamp_ms)  # same draws, 1 / qps
    wl = to_workload(b, "x")
    assert wl.arrival_s.tolist() == [r.timestamp_ms / 1e3 for r in b]
    assert wl.input_len.tolist() == [r.prompt_len for r in b]
    with pytest.raises(ValueError, match="pool"):
        build_point(LoadPoint(1.0, 11), tok, 0.1, 4096, 0, pool=10)


def _log(path, seconds_by_batch):
    rows, t = [], 0.0
    for i, (n, sec) in enumerate(seconds_by_batch):
        t += sec
        rows.append({"mode": "decode_only", "decode_rids": [f"r{j}" for j in range(n)],
                     "prefill": [], "measured_s": sec, "end_s": t, "i": i})
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return [str(path)]


def test_host_share_per_class(tmp_path):
    warm = [(1, 1.0)] * WARMUP
    big = _log(tmp_path / "big", warm + [(1, 0.030)] * 4 + [(6, 0.080)] * 4 + [(12, 0.1)] * 2)
    tiny = _log(tmp_path / "tiny", warm + [(1, 0.003)] * 4 + [(6, 0.008)] * 4)
    shares = host_shares(big, tiny)
    assert set(shares) == {"decode 1-1", "decode 5-8"}  # too few 12-row iterations
    assert shares["decode 1-1"]["host_share"] == pytest.approx(0.1, abs=0.01)
    assert np.isclose(shares["decode 5-8"]["model_ms"], 80.0)
