"""libsmctrl backend: driver-version gate and its override (no library needed)."""

from __future__ import annotations

from sglang_duet.partition import env
from sglang_duet.partition.libsmctrl import driver_supported


def test_known_drivers_pass(monkeypatch):
    monkeypatch.delenv(env.LIBSMCTRL_ANY_DRIVER, raising=False)
    monkeypatch.delenv(env.LIBSMCTRL_MASK_OFF, raising=False)
    assert driver_supported(12040, "x86_64")[0]
    assert driver_supported(12080, "x86_64")[0]


def test_newer_driver_refused_with_reason(monkeypatch):
    monkeypatch.delenv(env.LIBSMCTRL_ANY_DRIVER, raising=False)
    monkeypatch.delenv(env.LIBSMCTRL_MASK_OFF, raising=False)
    ok, why = driver_supported(13000, "x86_64")
    assert not ok
    assert "CUDA 13.0" in why and "12.8" in why and env.LIBSMCTRL_ANY_DRIVER in why


def test_unknown_machine_refused(monkeypatch):
    monkeypatch.delenv(env.LIBSMCTRL_ANY_DRIVER, raising=False)
    monkeypatch.delenv(env.LIBSMCTRL_MASK_OFF, raising=False)
    ok, why = driver_supported(12040, "ppc64le")
    assert not ok and "ppc64le" in why


def test_overrides(monkeypatch):
    monkeypatch.delenv(env.LIBSMCTRL_MASK_OFF, raising=False)
    monkeypatch.setenv(env.LIBSMCTRL_ANY_DRIVER, "1")
    assert driver_supported(12040, "ppc64le")[0]  # unlisted machine, known driver range
    assert driver_supported(7050, "x86_64")[0]
    monkeypatch.delenv(env.LIBSMCTRL_ANY_DRIVER)
    monkeypatch.setenv(env.LIBSMCTRL_MASK_OFF, "0x1234")
    assert driver_supported(13000, "x86_64")[0]


def test_any_driver_override_refused_above_known_offsets(monkeypatch):
    """Above 12.8 the offset is unknown: only an explicit MASK_OFF is accepted."""
    monkeypatch.delenv(env.LIBSMCTRL_MASK_OFF, raising=False)
    monkeypatch.setenv(env.LIBSMCTRL_ANY_DRIVER, "1")
    for version in (12090, 13000):
        ok, why = driver_supported(version, "x86_64")
        assert not ok and env.LIBSMCTRL_MASK_OFF in why and "unknown offset" in why


def test_library_path_from_env(monkeypatch):
    monkeypatch.setenv(env.LIBSMCTRL_PATH, "/opt/x/libsmctrl.so")
    assert env.libsmctrl_path() == "/opt/x/libsmctrl.so"
    monkeypatch.delenv(env.LIBSMCTRL_PATH)
    assert env.libsmctrl_path() is None
