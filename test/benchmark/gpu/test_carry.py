"""The carry folder's logic on the CPU: wheel trimming, requirement classes, the pins; and, when
`make gpu-carry` has built it, the folder itself (size caps, hashes, verify report)."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from benchmark.gpu.carry.spec import (
    ACCEPTED_CONFLICTS,
    CALL_BUDGET_BYTES,
    DROPPED_MODULES,
    IMAGE_OVERRIDES,
    MAX_CALL_BYTES,
    MAX_CARRY_BYTES,
    PYPI_PINS,
    ROOT,
    SIZE_RECORD,
    TRIMS,
    UNCARRIED_MODULES,
    image_packages,
    pin_name,
    spec_fingerprint,
)
from benchmark.gpu.carry.trim import trim_wheel
from benchmark.gpu.carry.verify import check_requirements, tree_bytes

CARRY = ROOT / ".gpu-carry"


def _wheel(path: Path, files: dict[str, bytes]) -> Path:
    dist = "demo-1.0.dist-info"
    files = {**files, f"{dist}/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n"}
    record = []
    for name, data in files.items():
        digest = hashlib.sha256(data).digest()
        b64 = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        record.append(f"{name},sha256={b64},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return path


def test_trim_drops_members_and_pip_installs_the_rest(tmp_path):
    src = _wheel(tmp_path / "demo-1.0-py3-none-any.whl",
                 {"demo/__init__.py": b"X = 1\n", "demo/big/blob.so": b"\0" * 5000,
                  "demo/keep.py": b"Y = 2\n"})
    dst = tmp_path / "out" / src.name
    report = trim_wheel(src, dst, ["demo/big/*"])
    assert report.dropped == (("demo/big/blob.so", 5000),)
    names = zipfile.ZipFile(dst).namelist()
    assert "demo/big/blob.so" not in names and "demo/keep.py" in names
    record = zipfile.ZipFile(dst).read("demo-1.0.dist-info/RECORD").decode()
    assert "blob.so" not in record and "demo/keep.py" in record
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "-q",
                    "--disable-pip-version-check", "--target", str(site), str(dst)], check=True)
    assert (site / "demo" / "keep.py").exists() and not (site / "demo" / "big").exists()


@pytest.mark.skipif(not (shutil.which("cc") and shutil.which("strip")), reason="needs cc, strip")
def test_trim_strips_debug_info_and_records_the_new_hash(tmp_path):
    src_c = tmp_path / "lib.c"
    src_c.write_text("int answer(void) { return 42; }\n" * 1 + "".join(
        f"static int f{i}(int x) {{ return x * {i}; }}\nint g{i}(int x) {{ return f{i}(x); }}\n"
        for i in range(200)))
    so = tmp_path / "libdemo.so"
    subprocess.run(["cc", "-g", "-shared", "-fPIC", "-o", str(so), str(src_c)], check=True)
    src = _wheel(tmp_path / "demo-1.0-py3-none-any.whl",
                 {"demo/__init__.py": b"", "demo/libdemo.so": so.read_bytes()})
    dst = tmp_path / "out" / src.name
    report = trim_wheel(src, dst, [])
    assert [m for m, _, _ in report.stripped] == ["demo/libdemo.so"]
    (_, before, after), = report.stripped
    assert after < before
    site = tmp_path / "site"  # pip checks RECORD's hash of the stripped file
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "-q",
                    "--disable-pip-version-check", "--target", str(site), str(dst)], check=True)
    lib = site / "demo" / "libdemo.so"
    assert lib.stat().st_size == after
    import ctypes

    assert ctypes.CDLL(str(lib)).answer() == 42


def test_trim_refuses_a_rule_that_matches_nothing(tmp_path):
    src = _wheel(tmp_path / "demo-1.0-py3-none-any.whl", {"demo/__init__.py": b""})
    with pytest.raises(ValueError, match="layout changed"):
        trim_wheel(src, tmp_path / "o.whl", ["demo/absent/*"])
    assert not (tmp_path / "o.whl").exists()


def test_requirements_are_classified():
    wheels = [{"name": "app", "version": "1", "requires": [
        "lib==2.0", "torch==2.11.0", "numpy>=3", "tqdm", "absent",
        "onlymac; sys_platform=='darwin'", "extra-only; extra == 'x'"]},
        {"name": "lib", "version": "2.0", "requires": []}]
    image = {"torch": "2.11.0", "numpy": "2.5.2", "tqdm": None}
    rows = check_requirements(wheels, image)
    assert rows["accepted_conflict"] == []
    assert [r.split(" (")[0] for r in rows["carried"]] == ["app -> lib==2.0"]
    assert [r.split(" (")[0] for r in rows["image"]] == ["app -> torch==2.11.0"]
    assert [r.split(" (")[0] for r in rows["conflict"]] == ["app -> numpy>=3"]
    assert rows["image_version_unknown"] == ["app -> tqdm"]
    assert rows["not_carried"] == ["app -> absent"]


def test_pins_are_exact_and_shadow_the_image_only_where_said():
    names = [pin_name(p) for p in PYPI_PINS]
    assert len(names) == len(set(names)), "a package pinned twice stops the whole install"
    assert all("==" in p for p in PYPI_PINS)
    image = image_packages()
    assert image["torch"] == "2.11.0" and image["triton"] == "3.6.0"
    assert {n for n in names if n in image} == set(IMAGE_OVERRIDES)
    assert set(TRIMS) <= set(names)
    assert all(n in image and n not in names for n in ACCEPTED_CONFLICTS)


def test_tree_plus_recorded_carry_fits_the_call_budget():
    """What one device call carries: the tracked tree (measured now) plus the carry as `carry
    build` last recorded it, for the current pins and trims; under 60 MiB (the device tool
    refuses a call over 64). Fails when results grow the tree, or when the spec changed and
    nobody rebuilt the carry (`make gpu-carry` rewrites carry_size.json)."""
    record = json.loads(SIZE_RECORD.read_text())
    assert record["spec"] == spec_fingerprint(), (
        "carry_size.json was written for other pins/trims: run `make gpu-carry` and commit it")
    assert record["call_budget_bytes"] == CALL_BUDGET_BYTES < MAX_CALL_BYTES
    assert 0 < record["carry_bytes"] <= MAX_CARRY_BYTES
    tree = tree_bytes()
    assert tree + record["carry_bytes"] <= CALL_BUDGET_BYTES, (
        f"tracked tree {tree / (1 << 20):.2f} MiB + carry {record['carry_mib']} MiB is over "
        f"{CALL_BUDGET_BYTES >> 20} MiB: take weight out of the tree (benchmark/gpu/README.md)")


def test_dropped_modules_are_the_ones_imports_py_reports():
    text = (ROOT / "benchmark" / "gpu" / "carry" / "imports.py").read_text()
    assert all(f'"{m}"' in text for m in (*DROPPED_MODULES, *UNCARRIED_MODULES))
    assert not set(UNCARRIED_MODULES) & {pin_name(p) for p in PYPI_PINS}
    # each dropped module is the file a TRIMS rule removes
    rules = [p for rules in TRIMS.values() for p, _ in rules]
    for m in DROPPED_MODULES:
        stem = m.replace(".", "/")
        assert any(r.startswith(stem) for r in rules), m


def test_serving_path_loads_no_dropped_module():
    """SGLang's serving path for Qwen3, imported in this (CPU, full-SGLang) venv, loads none of
    the extension modules the carry drops (imports.py reports any that it loads)."""
    modules = ["sglang.srt.entrypoints.http_server", "sglang.srt.managers.scheduler",
               "sglang.srt.model_executor.model_runner", "sglang.srt.models.qwen3",
               "sglang.srt.multimodal.processors.base_processor", "tvm_ffi"]
    out = subprocess.run([sys.executable, str(ROOT / "benchmark/gpu/carry/imports.py"), *modules],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    body = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(r["ok"] for r in body["modules"].values()), body["modules"]
    assert body["loaded_dropped"] == []
    assert "llguidance" not in body["loaded_top_level"]


def _built() -> dict:
    manifest = CARRY / "manifest.json"
    if not manifest.exists():
        pytest.skip("carry folder not built here (make gpu-carry builds and verifies it; it "
                    "downloads ~500 MB, so CI does not)")
    return json.loads(manifest.read_text())


def test_built_carry_fits_and_matches_its_manifest():
    manifest = _built()
    files = {p.name: p for p in (CARRY / "wheels").glob("*.whl")}
    assert set(files) == {w["file"] for w in manifest["wheels"]}
    total = sum(p.stat().st_size for p in files.values())
    assert total <= MAX_CARRY_BYTES
    for w in manifest["wheels"]:
        assert hashlib.sha256(files[w["file"]].read_bytes()).hexdigest() == w["sha256"]
    # the tracked record is this build's (a build rewrites it; commit it with the spec)
    record = json.loads(SIZE_RECORD.read_text())
    assert record["carry_bytes"] == manifest["total_bytes"] == total
    assert {pin_name(f.split("-", 1)[0]) for f in files} >= {pin_name(p) for p in PYPI_PINS}


def test_built_carry_verified():
    _built()
    report = CARRY / "verify.json"
    if not report.exists():
        pytest.skip("carry folder built but not verified (python -m benchmark.gpu.carry verify)")
    body = json.loads(report.read_text())
    assert body["sizes"]["carry_bytes"] + body["sizes"]["tree_bytes"] <= CALL_BUDGET_BYTES
    assert body["ok"], body["failed_imports"] or body["requirements"]["conflict"]
