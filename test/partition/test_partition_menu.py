"""PartitionMenu: planning, building with a fake backend, grant checks and the fallback."""

from __future__ import annotations

import pytest

from sglang_duet.partition import (
    Granularity,
    PartitionBackend,
    PartitionError,
    PartitionMenu,
    RawPair,
    build_partition_menu,
)
from sglang_duet.partition.none import NoneBackend


class FakeBackend(PartitionBackend):
    """Hands out fake stream handles; `short` makes the decode grant smaller than asked."""

    name = "fake"

    def __init__(self, total=132, gran=None, short_at=None, round_to=None, refuse=()):
        self.total, self.short_at, self.round_to = total, short_at, round_to
        self.refuse = refuse  # decode sizes create_pair refuses (PartitionError)
        self.gran = gran or Granularity(8, 8, "probe")
        self.open: set[int] = set()
        self.created = 0

    def available(self, device=0):
        return True, "fake"

    def num_sms(self, device=0):
        return self.total

    def granularity(self, device=0):
        return self.gran

    def create_pair(self, device, decode_sms, min_prefill_sms):
        if self.refuse == "all" or decode_sms in self.refuse:
            raise PartitionError(f"fake: no {decode_sms}-SM split")
        got = decode_sms - 2 if decode_sms == self.short_at else decode_sms
        if self.round_to:
            got = -(-decode_sms // self.round_to) * self.round_to
        self.created += 1
        key = self.created
        self.open.add(key)
        return RawPair(
            1000 + 2 * key, 1001 + 2 * key, got, self.total - got, lambda: self.open.discard(key)
        )


class TestPlan:
    def test_h100_plan(self):
        menu = PartitionMenu.plan("green-ctx", 132, Granularity(8, 8), 16, 16)
        assert menu.decode_sizes == tuple(range(16, 113, 8))
        assert menu.prefill_sms(16) == 116
        with pytest.raises(PartitionError, match="planned"):
            menu.streams(16)

    def test_explicit_sizes(self):
        menu = PartitionMenu.plan("green-ctx", 132, Granularity(8, 8), sizes=(32, 64))
        assert menu.decode_sizes == (32, 64)

    def test_unknown_size(self):
        menu = PartitionMenu.plan("green-ctx", 132, Granularity(8, 8))
        with pytest.raises(KeyError, match="no 20-SM decode split"):
            menu.prefill_sms(20)

    def test_none_menu_is_empty(self):
        menu = PartitionMenu.plan("none", 132, None)
        assert menu.decode_sizes == () and len(menu) == 0
        assert "no decode sizes" in menu.describe()

    def test_describe_lists_pairs(self):
        text = PartitionMenu.plan("libsmctrl", 108, Granularity(2, 2, "tpc")).describe()
        assert "16/92*" in text and "92/16*" in text


class TestSmMenu:
    def test_green_ctx(self):
        pytest.importorskip("sglang_duet.policy.sm_menu")
        sm = PartitionMenu.plan("green-ctx", 132, Granularity(8, 8)).sm_menu
        assert sm.total_sms == 132
        assert sm.decode_sizes == tuple(range(16, 113, 8))

    def test_a100_tpc(self):
        pytest.importorskip("sglang_duet.policy.sm_menu")
        sm = PartitionMenu.plan("libsmctrl", 108, Granularity(2, 2, "tpc")).sm_menu
        assert sm.decode_sizes[0] == 16 and sm.decode_sizes[-1] == 92

    def test_none_without_device_raises(self):
        with pytest.raises(PartitionError, match="knows no device"):
            _ = PartitionMenu.plan("none", 0, None).sm_menu


class TestBuild:
    def test_builds_every_size_once(self):
        fake = FakeBackend()
        menu = PartitionMenu.build(fake, 0, 16, 16)
        assert menu.decode_sizes == tuple(range(16, 113, 8))
        assert fake.created == len(menu) == len(fake.open)
        d, p = menu.raw_streams(16)
        assert d != p
        menu.close()
        assert not fake.open

    def test_a_short_grant_drops_that_size_only(self, caplog):
        fake = FakeBackend(short_at=48)
        menu = PartitionMenu.build(fake, 0, 16, 16)
        assert menu.decode_sizes == tuple(s for s in range(16, 113, 8) if s != 48)
        assert len(fake.open) == len(menu)  # the short split's streams were released
        assert "48-SM decode split is dropped" in caplog.text and "granted decode=46" in caplog.text

    def test_a_refused_size_drops_that_size_only(self, caplog):
        fake = FakeBackend(refuse=(112,))
        menu = PartitionMenu.build(fake, 0, 16, 16)
        assert menu.decode_sizes == tuple(range(16, 105, 8))
        assert "112-SM decode split is dropped" in caplog.text and "fake: no 112" in caplog.text
        menu.close()
        assert not fake.open

    def test_every_size_refused_raises_and_releases(self):
        fake = FakeBackend(refuse="all")
        with pytest.raises(PartitionError, match="refused every decode split"):
            PartitionMenu.build(fake, 0, 16, 16)
        assert not fake.open

    def test_an_unexpected_error_releases_what_was_made(self):
        class Broken(FakeBackend):
            def create_pair(self, device, decode_sms, min_prefill_sms):
                if decode_sms == 48:
                    raise OSError("driver gone")
                return super().create_pair(device, decode_sms, min_prefill_sms)

        fake = Broken()
        with pytest.raises(OSError):
            PartitionMenu.build(fake, 0, 16, 16)
        assert fake.created == 4 and not fake.open

    def test_rounded_up_duplicates_are_dropped(self):
        fake = FakeBackend(gran=Granularity(4, 4), round_to=8)
        menu = PartitionMenu.build(fake, 0, 16, 20)  # asks 16, 20, ..., 112
        assert menu.decode_sizes == tuple(range(16, 113, 8))
        assert len(fake.open) == len(menu)

    def test_none_backend_builds_empty(self):
        menu = PartitionMenu.build(NoneBackend(), 0)
        assert len(menu) == 0


def test_build_partition_menu_falls_back_to_none(monkeypatch, caplog):
    from sglang_duet.partition import registry

    fake = FakeBackend(refuse="all")
    monkeypatch.setattr(registry, "select_backend", lambda name, device: (fake, "fake chosen"))
    menu, reason = build_partition_menu("auto")
    assert menu.backend == "none" and len(menu) == 0
    assert "fake failed at start-up" in reason and "falling back to none" in reason
    assert not fake.open


def test_build_partition_menu_keeps_the_sizes_granted(monkeypatch):
    """One refused split no longer closes the backend: the others are the menu."""
    from sglang_duet.partition import registry

    fake = FakeBackend(short_at=16)
    monkeypatch.setattr(registry, "select_backend", lambda name, device: (fake, "fake chosen"))
    menu, reason = build_partition_menu("auto")
    assert menu.backend == "fake" and reason == "fake chosen"
    assert menu.decode_sizes == tuple(range(24, 113, 8)) and len(fake.open) == len(menu)


class TestRestrict:
    def test_keeps_only_the_sizes_and_releases_the_rest(self):
        backend = FakeBackend(total=132)
        menu = PartitionMenu.build(backend, sizes=(16, 32, 48, 64))
        assert len(backend.open) == 4
        kept = menu.restrict((16, 64))
        assert kept.decode_sizes == (16, 64)
        assert kept.prefill_sms(64) == 68
        assert len(backend.open) == 2  # the 32 and 48 splits' streams were released
        assert kept.raw_streams(16) != kept.raw_streams(64)
        assert kept.sm_menu.decode_sizes == (16, 64)
        assert menu.decode_sizes == ()  # the old menu handed its entries over
        kept.close()
        assert not backend.open

    def test_unknown_size_is_refused(self):
        menu = PartitionMenu.build(FakeBackend(total=132), sizes=(16, 32))
        with pytest.raises(KeyError, match=r"\[24\]"):
            menu.restrict((16, 24))
        assert menu.decode_sizes == (16, 32)  # nothing changed
