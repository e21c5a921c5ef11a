"""sgl-duet-kernel builds on a CPU machine and its library never links the CUDA driver."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "sgl-duet-kernel")


def _needed(path: str) -> list[str]:
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True)
    return [line.split("[")[1].rstrip("]") for line in out.stdout.splitlines() if "NEEDED" in line]


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")
def test_cmake_build_from_source(tmp_path):
    cfg = ["cmake", "-S", SRC, "-B", str(tmp_path), "-DCMAKE_BUILD_TYPE=Release"]
    if shutil.which("ninja"):
        cfg += ["-G", "Ninja"]
    res = subprocess.run(cfg, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    res = subprocess.run(["cmake", "--build", str(tmp_path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    lib = tmp_path / "libsgl_duet_kernel.so"
    assert lib.exists()
    if shutil.which("readelf"):
        assert not [n for n in _needed(str(lib)) if "libcuda" in n or "cudart" in n]


def test_installed_library_has_no_cuda_dependency():
    k = pytest.importorskip("sgl_duet_kernel")
    path = k.library_path()
    assert os.path.exists(path)
    if shutil.which("readelf") is None:
        pytest.skip("readelf not installed")
    needed = _needed(path)
    assert not [n for n in needed if "libcuda" in n or "cudart" in n], needed
