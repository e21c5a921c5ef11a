"""The look-ahead delivery check on made-up arrivals, plan logs and SSE streams (no SGLang)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchmark.gpu.delivery import (
    MAX_SHARE,
    MIN_EXPECTED,
    delivery_summary,
    expected_if_bunched,
    stream_generate,
)

T_D = 0.010  # seconds per decode step


def spatial_rows(k: int, n_d: int, iters: int) -> list[dict]:
    return [{"mode": "spatial", "decode_rids": [f"d{i}" for i in range(n_d)], "lookahead": k,
             "decode_steps": k, "predicted_decode_s": T_D} for _ in range(iters)]


def per_step(n: int) -> list[tuple[float, int]]:
    return [(j * T_D, 1) for j in range(n)]


def k_at_a_time(n: int, k: int) -> list[tuple[float, int]]:
    """Step j's token arrives with the rest of its iteration, 0.1 ms after the one before."""
    return [((j // k + 1) * k * T_D + (j % k) * 1e-4, 1) for j in range(n)]


def test_expected_share_counts_look_ahead_tokens_after_each_iterations_first():
    rows = spatial_rows(4, 2, 3) + [{"mode": "aggregated", "decode_rids": ["a", "b"],
                                    "lookahead": 1, "decode_steps": 0}]
    # spatial: 3 iterations x 2 decodes x 4 steps = 24 tokens, 18 after each first step; + 2
    assert expected_if_bunched(rows) == pytest.approx(18 / 26)
    assert expected_if_bunched([]) == 0.0


def test_per_step_delivery_passes_and_k_at_a_time_fails():
    rows = spatial_rows(4, 8, 10)
    good = delivery_summary([per_step(40) for _ in range(8)], rows, judged=True)
    assert good["bunched_share"] == 0.0 and good["ok"] is True
    assert good["client_gap_p50_ms"] == pytest.approx(T_D * 1e3)
    bad = delivery_summary([k_at_a_time(40, 4) for _ in range(8)], rows, judged=True)
    assert bad["expected_if_bunched"] == pytest.approx(0.75)
    assert bad["bunched_share"] > MAX_SHARE * bad["expected_if_bunched"] and bad["ok"] is False


def test_tokens_coalesced_into_one_chunk_count_as_bunched():
    rows = spatial_rows(4, 1, 10)
    chunks = [(j * 4 * T_D, 4) for j in range(10)]  # every iteration's 4 tokens in one chunk
    out = delivery_summary([chunks], rows, judged=True)
    assert out["bunched_share"] == pytest.approx(0.75) and out["ok"] is False


def test_not_judged_without_streams_or_without_look_ahead():
    rows = spatial_rows(4, 8, 10)
    cpu = delivery_summary([k_at_a_time(40, 4)], rows, judged=False)
    assert cpu["ok"] is None and cpu["bunched_share"] > 0.5 and "not judged" in cpu["note"]
    few = spatial_rows(1, 8, 10)  # k = 1: nothing to bunch, nothing to tell
    out = delivery_summary([per_step(10)], few, judged=True)
    assert out["expected_if_bunched"] < MIN_EXPECTED and out["ok"] is None and "note" in out


def test_discarded_surplus_tokens_are_not_counted():
    rows = spatial_rows(4, 2, 1)
    rows[0]["discarded"] = 3  # one request finished after its first step: 8 - 3 = 5 sent
    assert expected_if_bunched(rows) == pytest.approx(3 / 5)


def test_a_spatial_row_whose_decodes_had_finished_counts_no_tokens():
    rows = spatial_rows(4, 2, 1) + [{"mode": "spatial", "decode_rids": ["a", "b"],
                                    "lookahead": 4, "decode_steps": 0}]
    assert expected_if_bunched(rows) == pytest.approx(6 / 8)


class _Stub(BaseHTTPRequestHandler):
    """/generate answering a stream of SSE chunks from the test's ``script``."""

    script: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for msg in self.script:
            self.wfile.write(b"data: " + json.dumps(msg).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):
        pass


@pytest.fixture
def stub():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def _chunk(ids, n, reason=None):
    return {"output_ids": ids, "meta_info": {"completion_tokens": n, "finish_reason": reason}}


@pytest.mark.parametrize("script", [
    [_chunk([5], 1), _chunk([5, 6], 2), _chunk([5, 6], 2), _chunk([5, 6, 7, 8], 4)],  # cumulative
    [_chunk([5], 1), _chunk([6], 2), _chunk([7, 8], 4)],  # --incremental-streaming-output
])
def test_stream_generate_reads_cumulative_and_incremental_chunks(stub, script):
    _Stub.script = script
    ids, arrivals = stream_generate(stub, [1, 2, 3], 4)
    assert ids == [5, 6, 7, 8]
    assert [n for _, n in arrivals] == [1, 1, 2]  # the repeated chunk brought nothing
    assert all(a[0] <= b[0] for a, b in zip(arrivals, arrivals[1:], strict=False))


@pytest.mark.parametrize("last", [{"error": {"message": "bad input"}},
                                  _chunk([5], 1, {"type": "abort", "message": "x"})])
def test_stream_generate_raises_on_a_streamed_error_or_abort(stub, last):
    _Stub.script = [_chunk([5], 1), last]
    with pytest.raises(RuntimeError):
        stream_generate(stub, [1], 4)
