"""The C library's driver plumbing against a fake libcuda.so.1 (compiled here from
fake_libcuda.c): entry points found by base name, green-context split checks, lifetimes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("sgl_duet_kernel", reason="sgl-duet-kernel is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CUDA_INCLUDE = "/usr/local/cuda/include"


@pytest.fixture(scope="module")
def fake_dir(tmp_path_factory):
    if shutil.which("gcc") is None or not os.path.exists(os.path.join(CUDA_INCLUDE, "cuda.h")):
        pytest.skip("needs gcc and the CUDA toolkit headers")
    out = tmp_path_factory.mktemp("fakecuda")
    cmd = [
        "gcc",
        "-shared",
        "-fPIC",
        "-O1",
        f"-I{CUDA_INCLUDE}",
        "-o",
        str(out / "libcuda.so.1"),
        os.path.join(HERE, "fake_libcuda.c"),
    ]
    subprocess.run(cmd, check=True, capture_output=True)
    return str(out)


def _run(fake_dir: str, body: str, **env: str) -> dict:
    """Runs `body` in a fresh interpreter that sees the fake driver; returns its JSON `res`."""
    code = "import ctypes, json, sgl_duet_kernel as k\nres = {}\n"
    code += textwrap.dedent(body)
    code += "\nprint(json.dumps(res))\n"
    full_env = dict(
        os.environ,
        LD_LIBRARY_PATH=fake_dir,
        PYTHONPATH=os.pathsep.join(
            [os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH", "")]
        ),
        **env,
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=full_env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_device_queries_and_symbol_names(fake_dir):
    res = _run(
        fake_dir,
        """
        res["version"] = k.driver_version()
        res["info"] = list(k.device_info(0))
        res["count"] = k.device_count()
        fake = ctypes.CDLL("libcuda.so.1")
        fake.fake_requested.restype = ctypes.c_char_p
        res["asked"] = fake.fake_requested().decode().split()
    """,
    )
    assert res["version"] == 13000 and res["count"] == 1
    assert res["info"] == [[9, 0], 132]
    # the driver is asked for base names; the library picks ABI versions via the version
    names = [s.split("@")[0] for s in res["asked"]]
    assert "cuCtxPushCurrent" in names and "cuStreamDestroy" in names
    assert not [s for s in names if s.endswith(("_v2", "_v3", "_ptsz"))]


def _abi_table() -> list[tuple[str, int]]:
    text = open(os.path.join(ROOT, "sgl-duet-kernel", "csrc", "driver.h")).read()
    return [(n, int(v)) for n, v in re.findall(r"^\s+X\((\w+), (\d+)\)", text, re.M)]


def test_abi_column_names_a_typedef_in_the_cuda_headers():
    """Each entry point's version in driver.h is one whose PFN_ typedef exists (the prototype
    the library calls); a wrong column would ask the driver for another signature."""
    path = os.path.join(CUDA_INCLUDE, "cudaTypedefs.h")
    if not os.path.exists(path):
        pytest.skip("needs the CUDA toolkit headers")
    typedefs = open(path).read()
    table = _abi_table()
    assert len(table) > 20
    missing = [f"{n}@{v}" for n, v in table if f"PFN_{n}_v{v})" not in typedefs]
    assert not missing
    # the one whose newer ABI changed its arity, pinned explicitly
    assert ("cuStreamGetCtx", 9020) in table


@pytest.mark.parametrize("driver", ["12080", "13000"])
def test_each_entry_point_asked_at_its_listed_version(fake_dir, driver):
    res = _run(
        fake_dir,
        """
        k.open_driver()
        fake = ctypes.CDLL("libcuda.so.1")
        fake.fake_requested.restype = ctypes.c_char_p
        res["asked"] = fake.fake_requested().decode().split()
    """,
        FAKE_CUDA_VERSION=driver,
    )
    asked = dict(s.split("@") for s in res["asked"])
    for name, ver in _abi_table():
        if ver <= int(driver):
            assert asked.get(name) == str(ver), (name, asked.get(name))
        else:  # newer than the driver: not asked, left unresolved
            assert name not in asked


def test_smid_probe_calls_the_two_argument_stream_ctx(fake_dir):
    """At driver >= 12050 the fake, like the real driver, hands out the 3-argument
    cuStreamGetCtx_v2 to a request at the driver's version; the probe must get the 2-argument
    ABI it calls (a 2-argument call of v2 writes through a garbage pointer on a GPU)."""
    res = _run(
        fake_dir,
        """
        fake = ctypes.CDLL("libcuda.so.1")
        fake.fake_abi_calls.restype = ctypes.c_char_p
        res["built"] = k.smid_available()
        if res["built"]:
            k.smid_record(0x1000, 0x2000, 4)
        res["calls"] = fake.fake_abi_calls().decode().split()
    """,
    )
    if not res["built"]:
        pytest.skip("smid kernel not compiled in (no nvcc at build)")
    assert res["calls"] and set(res["calls"]) == {"v1"}


@pytest.mark.parametrize("no_fields,source", [("0", "driver"), ("1", "probe")])
def test_granularity_sources(fake_dir, no_fields, source):
    res = _run(fake_dir, "res['g'] = list(k.green_granularity(0))", FAKE_NO_FIELDS=no_fields)
    assert res["g"] == [8, 8, 132, source]


def test_driver_alignment_is_confirmed_by_a_probe_split(fake_dir):
    """A 13.x driver that reports an alignment of 4 while splits round to 8s: the probe wins,
    so every menu size is one a split grants exactly."""
    res = _run(
        fake_dir,
        """
        g = k.green_granularity(0)
        res["g"] = list(g)
        sizes = range(16, 132 - 16 + 1, g.align_sms)
        res["granted"] = []
        for s in sizes:
            with k.GreenPair(0, s, 16) as pair:
                res["granted"].append(pair.decode_sms)
        res["sizes"] = list(sizes)
    """,
        FAKE_REPORT_ALIGN="4",
    )
    assert res["g"] == [8, 8, 132, "probe"]
    assert res["granted"] == res["sizes"]


def test_granularity_with_finer_flag_is_probed(fake_dir):
    res = _run(fake_dir, "res['g'] = list(k.green_granularity(0, k.SPLIT_IGNORE_SM_COSCHEDULING))")
    assert res["g"] == [2, 2, 132, "probe"]


def test_pair_create_and_destroy(fake_dir):
    res = _run(
        fake_dir,
        """
        fake = ctypes.CDLL("libcuda.so.1")
        p = k.GreenPair(0, 16, 16)
        res["sizes"] = [p.decode_sms, p.prefill_sms]
        res["distinct"] = p.decode_stream != p.prefill_stream and p.decode_stream != 0
        res["live"] = fake.fake_live()
        p.close()
        res["after"] = fake.fake_live()
    """,
    )
    assert res["sizes"] == [16, 116] and res["distinct"]
    assert res["live"] == 4 and res["after"] == 0  # 2 green contexts + 2 streams


def test_short_grant_is_a_grant_error(fake_dir):
    res = _run(
        fake_dir,
        """
        fake = ctypes.CDLL("libcuda.so.1")
        try:
            k.GreenPair(0, 16, 16)
        except k.GrantError as e:
            res["err"] = str(e)
        res["live"] = fake.fake_live()
    """,
        FAKE_SHORT="2",
    )
    assert "granted decode=14" in res["err"] and "asked decode>=16" in res["err"]
    assert res["live"] == 0


def test_prefill_minimum_enforced(fake_dir):
    res = _run(
        fake_dir,
        """
        try:
            k.GreenPair(0, 120, 16)
        except k.GrantError as e:
            res["err"] = str(e)
    """,
    )
    assert "prefill=12" in res["err"]


def test_old_driver_refused(fake_dir):
    res = _run(
        fake_dir,
        """
        try:
            k.GreenPair(0, 16, 16)
        except k.DriverUnavailable as e:
            res["err"] = str(e)
    """,
        FAKE_CUDA_VERSION="12030",
    )
    assert "12.4" in res["err"] and "12.3" in res["err"]


def test_partition_backends_on_fake_hopper(fake_dir):
    res = _run(
        fake_dir,
        """
        from sglang_duet.partition import PartitionMenu, select_backend, probe_all
        fake = ctypes.CDLL("libcuda.so.1")
        backend, reason = select_backend("auto")
        res["picked"] = backend.name
        res["libsmctrl"] = probe_all()["libsmctrl"]
        menu = PartitionMenu.build(backend, 0, 16, 16)
        res["sizes"] = list(menu.decode_sizes)
        res["live"] = fake.fake_live()
        menu.close()
        res["after"] = fake.fake_live()
    """,
    )
    assert res["picked"] == "green-ctx"
    assert res["sizes"] == list(range(16, 113, 8))
    assert res["live"] == 4 * 13 and res["after"] == 0
    ok, why = res["libsmctrl"]
    assert not ok and "CUDA 13.0" in why  # driver outside libsmctrl's known offsets


def test_ampere_is_not_enabled_for_green_ctx(fake_dir):
    res = _run(
        fake_dir,
        """
        from sglang_duet.partition import get_backend
        res["green"] = get_backend("green-ctx").available()
    """,
        FAKE_CC="8",
        FAKE_SMS="108",
    )
    ok, why = res["green"]
    assert not ok and "sm_80" in why


def test_only_kept_splits_are_created(fake_dir):
    """Start-up creates the green contexts of the kept decode sizes only (2 contexts and 2
    streams each), not all 13 splits before cutting the menu."""
    res = _run(
        fake_dir,
        """
        from sglang_duet.partition import PartitionMenu, get_backend
        from sglang_duet.partition.plan import menu_for
        fake = ctypes.CDLL("libcuda.so.1")
        menu = PartitionMenu.build(get_backend("green-ctx"), 0, 16, 16, select=lambda *a:
                                   menu_for(*a, graph_sizes=6, cuda_graphs=True).decode_sizes)
        res["sizes"] = list(menu.decode_sizes)
        res["live"] = fake.fake_live()
        menu.close()
    """,
    )
    assert res["sizes"] == [16, 32, 56, 72, 96, 112]
    assert res["live"] == 4 * 6
