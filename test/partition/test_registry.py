"""Backend registry and `auto` selection on a machine without a GPU driver."""

from __future__ import annotations

import logging

import pytest

from sglang_duet.partition import (
    AUTO_ORDER,
    BACKEND_NAMES,
    BACKENDS,
    get_backend,
    probe_all,
    select_backend,
)


def test_names_are_cli_choices():
    assert BACKEND_NAMES == ("auto", "green-ctx", "libsmctrl", "none")
    assert set(BACKENDS) == set(BACKEND_NAMES) - {"auto"}
    assert AUTO_ORDER == ("green-ctx", "libsmctrl", "none")
    for name, cls in BACKENDS.items():
        assert cls.name == name


def test_unknown_name():
    with pytest.raises(ValueError, match="choose from"):
        get_backend("mps")
    with pytest.raises(ValueError):
        select_backend("mps")


def test_none_always_available():
    ok, why = get_backend("none").available()
    assert ok and "one stream" in why


@pytest.mark.usefixtures("no_driver")
class TestWithoutDriver:
    def test_green_ctx_reason_names_the_driver(self):
        ok, why = get_backend("green-ctx").available()
        assert not ok
        assert "no CUDA driver" in why and "libcuda.so.1" in why

    def test_libsmctrl_reason_names_the_driver(self):
        ok, why = get_backend("libsmctrl").available()
        assert not ok
        assert "no CUDA driver" in why and "libcuda.so.1" in why

    def test_probe_all(self):
        res = probe_all()
        assert list(res) == list(AUTO_ORDER)
        assert [ok for ok, _ in res.values()] == [False, False, True]

    def test_auto_picks_none_and_says_why(self, caplog):
        with caplog.at_level(logging.INFO, logger="sglang_duet.partition"):
            backend, reason = select_backend("auto")
        assert backend.name == "none"
        assert reason.startswith("auto -> none")
        assert "green-ctx (no CUDA driver" in reason and "libsmctrl (no CUDA driver" in reason
        assert any("auto -> none" in r.getMessage() for r in caplog.records)

    def test_named_unavailable_falls_back_with_warning(self, caplog):
        with caplog.at_level(logging.WARNING, logger="sglang_duet.partition"):
            backend, reason = select_backend("green-ctx")
        assert backend.name == "none"
        assert "green-ctx unavailable" in reason
        assert any(r.levelno == logging.WARNING for r in caplog.records)

    def test_named_unavailable_strict_raises(self):
        with pytest.raises(RuntimeError, match="libsmctrl is not available"):
            select_backend("libsmctrl", strict=True)


def test_missing_kernel_package_is_a_reason(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "sgl_duet_kernel":
            raise ImportError("No module named 'sgl_duet_kernel'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    for name in ("green-ctx", "libsmctrl"):
        ok, why = get_backend(name).available()
        assert not ok and "pip install --no-build-isolation ./sgl-duet-kernel" in why
