"""The policy is what the paper's search reads (`search_host.SearchHost`), which is what lets
`paper_scheme` take it without importing `duet`; and the reasons' time format."""

from __future__ import annotations

from types import SimpleNamespace

from sglang_duet.policy import DuetPolicy
from sglang_duet.policy.search_host import SearchHost, ms


def test_duet_policy_is_a_search_host():
    pol = DuetPolicy.build("adaptive", 0.05, scheme="paper")
    assert isinstance(pol, SearchHost)


def _members() -> set[str]:
    methods = {n for n, v in vars(SearchHost).items() if callable(v) and not n.startswith("__")}
    return set(SearchHost.__annotations__) | methods


def test_a_host_short_of_any_member_is_not():
    """isinstance checks every member, data ones included (what paper_search reads)."""
    assert {"tbt_slo_s", "_round_trip_s", "_spatial", "_agg_plan"} <= _members()
    pol = DuetPolicy.build("adaptive", 0.05, scheme="paper")
    for name in sorted(_members()):
        short = SimpleNamespace(**{m: getattr(pol, m) for m in _members() - {name}})
        assert not isinstance(short, SearchHost), name
    assert isinstance(SimpleNamespace(**{m: getattr(pol, m) for m in _members()}), SearchHost)


def test_ms_formats_seconds_as_milliseconds():
    assert ms(0.0125) == "12.5ms" and ms(0.0) == "0.0ms" and ms(1.23456) == "1234.6ms"
