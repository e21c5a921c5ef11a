"""Rewrites a wheel without some of its members, keeping RECORD consistent so pip installs it.

pip checks each installed file against RECORD's hash; a dropped member's RECORD line is dropped
with it, the rest are copied byte for byte (same compression level as pip writes).
"""

from __future__ import annotations

import fnmatch
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TrimReport:
    """What a trim left out: member names and their unpacked bytes."""

    dropped: tuple[tuple[str, int], ...]
    kept_files: int

    @property
    def dropped_bytes(self) -> int:
        return sum(size for _, size in self.dropped)


def _is_record(name: str) -> bool:
    return name.endswith(".dist-info/RECORD")


def trim_wheel(src: Path, dst: Path, patterns: list[str]) -> TrimReport:
    """Copies wheel `src` to `dst` leaving out members matching any fnmatch pattern."""

    def drop(name: str) -> bool:
        return any(fnmatch.fnmatch(name, p) for p in patterns)

    dropped: list[tuple[str, int]] = []
    kept = 0
    dst.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED,
                                                      compresslevel=6) as zout:
        for info in zin.infolist():
            if drop(info.filename):
                dropped.append((info.filename, info.file_size))
                continue
            data = zin.read(info)
            if _is_record(info.filename):
                lines = data.decode().splitlines()
                data = ("\n".join(ln for ln in lines if not drop(ln.split(",", 1)[0])) + "\n"
                        ).encode()
            zout.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
            kept += 1
    if not dropped:
        dst.unlink()
        raise ValueError(f"{src.name}: no member matches {patterns}; the wheel layout changed")
    return TrimReport(dropped=tuple(dropped), kept_files=kept)
