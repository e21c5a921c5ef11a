"""The fault suite, short: mixed good and bad requests with disconnects, a SIGTERM drain with
its deadline, and the scheduler, a TP rank (--tp 2) and the detokenizer killed under load, each
on its own sglang-duet server. Every check of #16 must hold."""

from __future__ import annotations

import pytest

from benchmark.serving.bad_requests import BAD_KINDS, GOOD_OPENAI
from benchmark.serving.soak import KILLS, suite

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def report():
    from sglang_duet.tiny_model import default_model_path

    return suite(str(default_model_path()), n=60, concurrency=16, abort_frac=0.1, bad_frac=0.2,
                 seed=1, timeout_s=120.0, drain_deadline_s=3.0)


def test_mixed_load_and_bad_requests(report):
    mixed = report["mixed"]
    assert mixed["passed"], mixed["checks"]
    assert report["lost"] == 0 and report["hung"] == 0 and report["bad_input_5xx"] == 0
    assert mixed["aborted"] > 0
    for kind in BAD_KINDS:  # every case, each a clear 4xx
        assert mixed["verdicts"][kind] == {"clear_4xx": mixed["verdicts"][kind]["clear_4xx"]}
    assert set(mixed["verdicts"][GOOD_OPENAI]) == {"ok"}
    assert report["clear_4xx"] == mixed["bad_requests_sent"] >= len(BAD_KINDS)
    assert mixed["sent"] == sum(mixed[k] for k in ("completed", "aborted", "errored", "hung"))
    big = report["health_during_10mb_body"]
    assert big["big_request_status"] == 400 and big["health_checks_during"] >= 1
    assert report["kv_pool_at_end"]["used_tokens"] == 0


def test_sigterm_drain(report):
    drain = report["drain"]
    assert drain["passed"], drain
    assert drain["new_requests"]["first_503_s"] is not None
    assert drain["deadline_s"] <= drain["time_to_exit_s"] < drain["deadline_s"] + 10


@pytest.mark.parametrize("child", KILLS)
def test_child_killed_under_load(report, child):
    killed = report["kill"][child]
    assert killed["passed"], killed
    assert killed["time_to_503_s"] < 2.0 and killed["time_to_exit_s"] < 10.0
    assert killed["exit_status"] != 0
