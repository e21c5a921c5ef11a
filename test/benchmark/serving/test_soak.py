"""The soak script with 100 requests against sglang-duet passes its own checks."""

from __future__ import annotations

import pytest

from benchmark.serving.launch import Server
from benchmark.serving.soak import BAD_KINDS, soak


@pytest.fixture(scope="module")
def duet(request):
    srv = Server(["--chunked-prefill-size", "64"]).start()
    request.addfinalizer(srv.stop)
    return srv


@pytest.mark.server
def test_soak_100_requests(duet):
    from sglang_duet.tiny_model import MODEL_CONFIG

    report = soak(duet.url, n=100, concurrency=32, abort_frac=0.1, bad_frac=0.1, seed=1,
                  timeout_s=120.0, vocab=MODEL_CONFIG["vocab_size"],
                  context=MODEL_CONFIG["max_position_embeddings"],
                  log_text=lambda: duet.log(tail=0))
    assert report["passed"], report
    assert report["sent"] == 100
    assert sum(report[k] for k in ("completed", "aborted", "errored", "hung")) == 100
    assert report["lost"] == 0 and report["hung"] == 0
    assert report["aborted"] > 0 and report["bad_requests_sent"] > 0
    assert report["kv_pool_after"]["used_tokens"] == 0
    assert report["kv_pool_after"]["free_tokens"] == report["kv_pool_before"]["free_tokens"]
    for kind in set(BAD_KINDS) & set(report["by_kind"]):
        assert "hung" not in report["by_kind"][kind]
    # malformed JSON and a prompt over the context length must be rejected, not served
    for kind in ("malformed_json", "too_long_prompt"):
        if kind in report["by_kind"]:
            assert set(report["by_kind"][kind]) == {"errored"}, report["by_kind"][kind]
