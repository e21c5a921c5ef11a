"""benchmark.overhead's cache flush: retried while SGLang refuses it for a request still running."""

from __future__ import annotations

import pytest

from benchmark.overhead.__main__ import flush_cache


class _Resp:
    def __init__(self, code: int) -> None:
        self.status_code = code


def test_flush_retries_until_the_server_accepts():
    codes = iter([400, 400, 200])
    calls = []

    def post(url, timeout):
        calls.append(url)
        return _Resp(next(codes))

    flush_cache(1234, timeout_s=5.0, post=post)
    assert calls == ["http://127.0.0.1:1234/flush_cache"] * 3


def test_flush_gives_up_with_the_status_after_the_timeout():
    with pytest.raises(RuntimeError, match="400"):
        flush_cache(1, timeout_s=0.0, post=lambda url, timeout: _Resp(400))
