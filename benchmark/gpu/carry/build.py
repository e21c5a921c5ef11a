"""Builds the carry folder: PyPI wheels for the GPU machine, the trimmed sglang-kernel, and this
project's two packages as wheels, plus `manifest.json` saying what each file is.

    OUT/wheels/*.whl        everything `pip install --no-index --no-deps --target` takes
    OUT/manifest.json       per wheel: source, bytes, sha256; the kernel trim; the totals

Downloads are cached in `CACHE` (git-ignored) so a rebuild fetches nothing new.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmark.gpu.carry.spec import (
    CALL_BUDGET_BYTES,
    MAX_CARRY_BYTES,
    MIB,
    PYPI_PINS,
    ROOT,
    SIZE_RECORD,
    TRIMS,
    Target,
    pin_name,
    spec_fingerprint,
)
from benchmark.gpu.carry.trim import trim_wheel
from benchmark.stamp import write_result

CACHE = ROOT / ".gpu-carry-cache"


def wheel_project(path: Path) -> str:
    """Normalised project name of a wheel file (its first dash-separated field)."""
    return pin_name(path.name.split("-", 1)[0])


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(pins: tuple[str, ...], dest: Path, target: Target, log=print) -> dict[str, Path]:
    """pip download --no-deps each pin for `target` into `dest`; pin name -> wheel path."""
    dest.mkdir(parents=True, exist_ok=True)
    have = {wheel_project(p): p for p in dest.glob("*.whl")}
    missing = [p for p in pins if pin_name(p) not in have]
    if missing:
        log(f"[carry] downloading {len(missing)} wheels into {dest}")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
               "--disable-pip-version-check", "-d", str(dest), *target.pip_flags(), *missing]
        subprocess.run(cmd, check=True)
        have = {wheel_project(p): p for p in dest.glob("*.whl")}
    out = {}
    for pin in pins:
        name = pin_name(pin)
        if name not in have:
            raise RuntimeError(f"no wheel for {pin} in {dest}")
        version = pin.split("==", 1)[1]
        if f"-{version}-" not in have[name].name:
            raise RuntimeError(f"{have[name].name} is not {pin}; delete it from {dest}")
        out[name] = have[name]
    return out


def build_own_wheels(dest: Path, log=print) -> list[Path]:
    """sglang-duet (pure Python) and sgl-duet-kernel (a C library for ctypes, tagged py3-none-
    linux_x86_64, so one wheel serves every Python 3) built here without build isolation."""
    dest.mkdir(parents=True, exist_ok=True)
    built = []
    # The project builds in pip's isolated environment (setuptools and wheel from its
    # build-system table); the kernel with the venv's scikit-build-core, as `make venv` does.
    for src, isolated in ((ROOT, True), (ROOT / "sgl-duet-kernel", False)):
        with tempfile.TemporaryDirectory() as tmp:
            log(f"[carry] building a wheel of {src.name}")
            cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                   "--disable-pip-version-check", "-w", tmp, str(src)]
            subprocess.run(cmd + ([] if isolated else ["--no-build-isolation"]), check=True,
                           cwd=tmp)
            for whl in Path(tmp).glob("*.whl"):
                built.append(Path(shutil.copy2(whl, dest / whl.name)))
    return built


def build(out: Path, target: Target | None = None, log=print) -> dict:
    """Builds `out` from scratch (its wheels/ folder is replaced); returns the manifest."""
    target = target or Target()
    wheels = out / "wheels"
    if wheels.exists():
        shutil.rmtree(wheels)
    wheels.mkdir(parents=True)
    fetched = download(PYPI_PINS, CACHE / "pypi", target, log)
    entries = []
    for name, path in fetched.items():
        rules = TRIMS.get(name, ())
        report = trim_wheel(path, wheels / path.name, [p for p, _ in rules])
        entry = _entry(wheels / path.name, "pypi" if not (report.dropped or report.stripped)
                       else "pypi, trimmed")
        entry["source_bytes"] = path.stat().st_size
        if report.dropped:
            entry["dropped"] = {
                "files": len(report.dropped), "unpacked_bytes": report.dropped_bytes,
                "largest": [{"member": m, "bytes": b} for m, b in
                            sorted(report.dropped, key=lambda d: -d[1])[:5]],
                "rules": [{"pattern": p, "why": why} for p, why in rules]}
        if report.stripped:
            entry["debug_info_stripped"] = [{"member": m, "bytes_before": a, "bytes_after": b}
                                            for m, a, b in report.stripped]
        if report.dropped or report.stripped:
            log(f"[carry] {path.name}: {path.stat().st_size / MIB:.1f} -> "
                f"{entry['bytes'] / MIB:.1f} MiB")
        entries.append(entry)
    entries += [_entry(p, "built here") for p in build_own_wheels(wheels, log)]
    entries.sort(key=lambda e: -e["bytes"])
    total = sum(e["bytes"] for e in entries)
    manifest = {
        "target": {"python": target.python_version, "platforms": list(target.platforms)},
        "wheels": entries,
        "total_bytes": total,
        "total_mib": round(total / MIB, 2),
        "max_bytes": MAX_CARRY_BYTES,
        "install": "python3 -m pip install --no-index --no-deps --no-compile --target SITE "
                   f"{out.name}/wheels/*.whl",
    }
    write_result(out / "manifest.json", manifest)
    write_size_record(manifest)
    log(f"[carry] {len(entries)} wheels, {total / MIB:.1f} MiB in {wheels}")
    return manifest


def write_size_record(manifest: dict, path: Path = SIZE_RECORD) -> dict:
    """The carry's size as this build made it, in a tracked file (`carry_size.json`): CI has no
    carry, and checks the tracked tree plus these bytes against CALL_BUDGET_BYTES. Plain JSON,
    not stamped, so rebuilding the same spec rewrites only what changed."""
    import json

    record = {"carry_bytes": manifest["total_bytes"], "carry_mib": manifest["total_mib"],
              "wheels": len(manifest["wheels"]), "spec": spec_fingerprint(),
              "call_budget_bytes": CALL_BUDGET_BYTES,
              "written_by": "python -m benchmark.gpu.carry build (make gpu-carry)"}
    path.write_text(json.dumps(record, indent=1) + "\n")
    return record


def _entry(path: Path, source: str) -> dict:
    return {"file": path.name, "source": source, "bytes": path.stat().st_size,
            "sha256": sha256(path)}
