"""`import sgl_duet_kernel` works without a driver; calls fail with precise reasons."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

k = pytest.importorskip("sgl_duet_kernel", reason="sgl-duet-kernel is not installed")


def test_import_in_clean_process():
    code = "import sgl_duet_kernel as k; print(k.ABI_VERSION, k.smid_available())"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[0] == "1"


def test_abi_and_struct_layout():
    from sgl_duet_kernel._lib import GreenPairStruct, lib

    assert lib().sgld_abi_version() == k.ABI_VERSION
    ptr = ctypes.sizeof(ctypes.c_void_p)
    assert ctypes.sizeof(GreenPairStruct) == 3 * ptr + 2 * ctypes.sizeof(ctypes.c_int)


def test_smid_kernel_compiled_in_when_nvcc_exists():
    nvcc = os.path.exists("/usr/local/cuda/bin/nvcc") or os.path.exists("/usr/local/bin/nvcc")
    if not nvcc:
        pytest.skip("no nvcc on this machine")
    assert k.smid_available()


@pytest.mark.usefixtures("no_driver")
class TestWithoutDriver:
    @pytest.mark.parametrize(
        "call",
        [
            k.driver_version,
            k.device_count,
            lambda: k.device_info(0),
            lambda: k.green_granularity(0),
            lambda: k.GreenPair(0, 16),
            lambda: k.stream_create(0),
        ],
    )
    def test_driver_calls_raise_driver_unavailable(self, call):
        with pytest.raises(k.DriverUnavailable, match=r"dlopen\(libcuda\.so\.1\) failed"):
            call()

    def test_smid_without_driver(self):
        with pytest.raises(k.DriverUnavailable):
            k.smid_record(0, 1, 1)


def test_libsmctrl_missing_is_reported(tmp_path):
    missing = str(tmp_path / "libsmctrl.so")
    with pytest.raises(k.LibsmctrlUnavailable, match="dlopen"):
        k.smctrl_open(missing)


def test_libsmctrl_setter_before_open_refuses():
    if k.smctrl_has_ext():
        pytest.skip("a libsmctrl is loaded in this process")
    with pytest.raises(ValueError, match="stream is NULL"):
        k.smctrl_set_stream_mask(0, 1, 0)
    with pytest.raises(k.LibsmctrlUnavailable, match="not loaded"):
        k.smctrl_set_stream_mask(0x1234, 1, 0)
