"""Fixtures for sgl-duet-kernel tests: the CPU-only expectations skip where a CUDA driver exists."""

from __future__ import annotations

import pytest


@pytest.fixture
def kernel():
    return pytest.importorskip("sgl_duet_kernel", reason="sgl-duet-kernel is not installed")


@pytest.fixture
def no_driver(kernel):
    """Skips the test on machines where libcuda.so.1 opens (they are not 'CPU machines')."""
    try:
        kernel.open_driver()
    except kernel.DriverUnavailable:
        return kernel
    pytest.skip("a CUDA driver is present: CPU-machine expectations do not apply")
