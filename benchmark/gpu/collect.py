"""Folds one check.sh step into its stage's JSON right after the step ends, so a later failure
loses nothing and the device tool's limit (8 files back) holds however many steps run.

    python -m benchmark.gpu.collect STAGE.json STEP RC SECONDS [FILE...]
    python -m benchmark.gpu.collect --summary OUT_DIR STAGES WALL_S

FILE: a JSON file (embedded whole) or any other file (its last 4000 characters). The stage JSON
is rewritten through benchmark.stamp.write_result; `ok` is true while every step returned 0.
`--summary` writes OUT_DIR/summary.json (stamped too): the stages asked for, the wall time and
`ok` (every stage*.json there is ok); the exit status is 0 only when ok.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmark.stamp import write_result


def load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {"steps": {}}


def fold(stage: Path, step: str, rc: int | None, seconds: float, files: list[Path]) -> dict:
    body = load(stage)
    body.pop("stamp", None)
    entry: dict = {"rc": rc, "seconds": seconds, "files": {}}
    for f in files:
        if not f.is_file():
            entry["files"][f.name] = None
        elif f.suffix == ".json":
            try:
                entry["files"][f.name] = json.loads(f.read_text())
            except json.JSONDecodeError as e:
                entry["files"][f.name] = {"unreadable": str(e)}
        else:
            entry["files"][f.name] = f.read_text(errors="replace")[-4000:]
    body.setdefault("steps", {})[step] = entry
    body["ok"] = all(s["rc"] == 0 for s in body["steps"].values())
    write_result(stage, body)
    return body


def summarize(out_dir: Path, stages: str, wall_s: float) -> dict:
    found = sorted(out_dir.glob("stage*.json"))
    ok = bool(found) and all(load(f).get("ok") is True for f in found)
    body = {"stages": stages, "wall_s": wall_s, "ok": ok}
    write_result(out_dir / "summary.json", body)
    return body


def main(argv: list[str] | None = None) -> int:
    a = sys.argv[1:] if argv is None else argv
    if a[:1] == ["--summary"] and len(a) == 4:
        return 0 if summarize(Path(a[1]), a[2], float(a[3]))["ok"] else 1
    if len(a) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    rc = None if a[2] in ("", "null") else int(a[2])
    fold(Path(a[0]), a[1], rc, float(a[3]), [Path(x) for x in a[4:]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
