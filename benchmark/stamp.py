"""One writer for every committed benchmark result: the JSON says which commit, machine and command
produced it, so a figure quoted in a note can be traced back and rerun.

    from benchmark.stamp import write_result
    write_result("benchmark/results/sim/speed.json", payload)

The stamp goes under the key ``"stamp"``; the payload's own keys are kept as they are. Paths inside
the stamp are relative to the repository root, so no temporary or home-directory path gets into a
committed result.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = "benchmark/results"  # relative to ROOT: where every result JSON lives


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                             timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpu() -> str | None:
    """The CUDA device's name, without importing torch when it is not already loaded (importing it
    costs seconds and a benchmark that does not use it should not pay that)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if torch.cuda.is_available():
            return f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    except Exception:  # noqa: BLE001 - a broken driver is "no GPU" for the stamp
        return None
    return None


def _command(argv: list[str] | None) -> str:
    argv = list(sys.argv if argv is None else argv)
    if argv and argv[0].endswith(".py"):
        mod = Path(argv[0]).resolve()
        try:
            rel = mod.relative_to(ROOT).with_suffix("")
            argv = ["python", "-m", ".".join(p for p in rel.parts if p != "__main__")] + argv[1:]
        except ValueError:
            argv[0] = mod.name
    return shlex.join(argv)


def stamp(argv: list[str] | None = None) -> dict[str, Any]:
    """Commit (with a ``-dirty`` suffix for uncommitted changes to the code), UTC date, machine
    and command. Changed result files do not count as dirty: a sweep that writes several results
    would otherwise stamp all but its first result as run on uncommitted code."""
    commit = _git("rev-parse", "--short=12", "HEAD")
    if commit and _git("status", "--porcelain", "--untracked-files=no", "--", ".",
                       f":(exclude){RESULTS}"):
        commit += "-dirty"
    return {
        "commit": commit,
        "date": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "gpu": _gpu(),
                    "python": platform.python_version(), "os": platform.platform(terse=True)},
        "command": _command(argv),
    }


def write_result(path: str | os.PathLike, payload: dict[str, Any], *,
                 argv: list[str] | None = None) -> Path:
    """Writes ``payload`` plus its stamp as indented JSON (parents created); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    body = {"stamp": stamp(argv), **{k: v for k, v in payload.items() if k != "stamp"}}
    out.write_text(json.dumps(body, indent=1, sort_keys=False, default=_jsonable) + "\n")
    return out


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
