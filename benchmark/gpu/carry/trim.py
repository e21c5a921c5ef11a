"""Rewrites a wheel without some of its members and with debug info stripped from its shared
libraries, keeping RECORD consistent so pip installs it.

pip checks each installed file against RECORD's hash; a dropped member's RECORD line is dropped
with it, a stripped member's line gets the new hash and size, the rest are copied byte for byte.
Stripping is `strip --strip-debug` (DWARF sections only; symbols, code and data, CUDA fatbins
included, stay), kept only where it saves at least 5% of the file.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TrimReport:
    """What a trim changed: dropped members and their unpacked bytes; stripped members with
    their bytes before and after."""

    dropped: tuple[tuple[str, int], ...]
    stripped: tuple[tuple[str, int, int], ...]
    kept_files: int

    @property
    def dropped_bytes(self) -> int:
        return sum(size for _, size in self.dropped)


def _is_shared_library(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base


def strip_debug(data: bytes) -> bytes:
    """`data` without DWARF debug sections, or unchanged when that saves under 5% (or when no
    `strip` is installed)."""
    if shutil.which("strip") is None or not data.startswith(b"\x7fELF"):
        return data
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lib.so"
        path.write_bytes(data)
        if subprocess.run(["strip", "--strip-debug", str(path)], capture_output=True).returncode:
            return data
        out = path.read_bytes()
    return out if len(out) < 0.95 * len(data) else data


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _rewrite_record(text: str, drop, changed: dict[str, bytes]) -> bytes:
    lines = []
    for line in text.splitlines():
        path = line.split(",", 1)[0]
        if drop(path):
            continue
        if path in changed:
            line = f"{path},{_record_hash(changed[path])},{len(changed[path])}"
        lines.append(line)
    return ("\n".join(lines) + "\n").encode()


def trim_wheel(src: Path, dst: Path, patterns: list[str], strip: bool = True) -> TrimReport:
    """Copies wheel `src` to `dst` leaving out members matching any fnmatch pattern (except those
    matching a pattern written `!pattern`) and, with `strip`, stripping debug info from its
    shared libraries."""

    keep = [p[1:] for p in patterns if p.startswith("!")]
    rules = [p for p in patterns if not p.startswith("!")]

    def drop(name: str) -> bool:
        return (any(fnmatch.fnmatch(name, p) for p in rules)
                and not any(fnmatch.fnmatch(name, p) for p in keep))

    dropped: list[tuple[str, int]] = []
    changed: dict[str, bytes] = {}
    record_info = None
    dst.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED,
                                                      compresslevel=6) as zout:
        for info in zin.infolist():
            if drop(info.filename):
                dropped.append((info.filename, info.file_size))
                continue
            if info.filename.endswith(".dist-info/RECORD"):
                record_info = info  # written last, once every change is known
                continue
            data = zin.read(info)
            if strip and _is_shared_library(info.filename):
                new = strip_debug(data)
                if new is not data:
                    changed[info.filename] = data = new
            zout.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
        if record_info is None:
            raise ValueError(f"{src.name}: no RECORD")
        record = _rewrite_record(zin.read(record_info).decode(), drop, changed)
        zout.writestr(record_info, record, compress_type=zipfile.ZIP_DEFLATED)
        kept = len(zout.infolist())
    if rules and not dropped:
        dst.unlink()
        raise ValueError(f"{src.name}: no member matches {patterns}; the wheel layout changed")
    stripped = tuple((name, zipfile.ZipFile(src).getinfo(name).file_size, len(data))
                     for name, data in changed.items())
    return TrimReport(dropped=tuple(dropped), stripped=stripped, kept_files=kept)
