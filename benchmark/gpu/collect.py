"""Folds one check.sh step into its stage's JSON right after the step ends, so a later failure
loses nothing and the device tool's limit (8 files back) holds however many steps run.

    python -m benchmark.gpu.collect STAGE.json STEP RC SECONDS [--cap S] [--optional]
                                    [--skip REASON] [FILE...]
    python -m benchmark.gpu.collect --summary OUT_DIR STAGES WALL_S

Each step gets a verdict: "passed" (rc 0), "failed" (any other rc; "timed_out" when the cap's
`timeout` killed it, rc 124 or 137) or "skipped" (`--skip REASON`: the stage's time was spent,
no CUDA device, ...). A skipped step is neither passed nor failed. The stage's `ok` is true when
every step that ran passed and no required step was skipped, false when a step failed, and null
when nothing failed but a required step did not run (`complete` says whether every required
step ran). FILE: a JSON file (embedded whole) or any other file (its last 4000 characters).
The stage JSON is rewritten through benchmark.stamp.write_result.

`--summary` writes OUT_DIR/summary.json (stamped too): the stages asked for, the wall time, each
stage's `ok`, the time plan (benchmark.gpu.plan) and `ok` (every stage ok); `dry_run` when no
step ran at all (CUDA absent). Exit status 0 when ok, or on a dry run; 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmark.stamp import write_result

TIMEOUT_RCS = (124, 137)  # timeout(1)'s exit status, and SIGKILL after --kill-after


def load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {"steps": {}}


def verdict(rc: int | None, skipped: str | None) -> str:
    if skipped is not None or rc is None:
        return "skipped"
    if rc == 0:
        return "passed"
    return "timed_out" if rc in TIMEOUT_RCS else "failed"


def stage_verdict(steps: dict) -> dict:
    """`ok`, `complete` and the steps per verdict, from the steps' entries."""
    by: dict[str, list[str]] = {"passed": [], "failed": [], "timed_out": [], "skipped": []}
    for name, s in steps.items():
        by[s["verdict"]].append(name)
    missing = [n for n, s in steps.items() if s["verdict"] == "skipped" and s.get("required")]
    failed = by["failed"] + by["timed_out"]
    ok = False if failed else (None if missing else bool(by["passed"]))
    return {"ok": ok, "complete": not missing, "verdicts": by}


def _file_entry(f: Path):
    if not f.is_file():
        return None
    if f.suffix == ".json":
        try:
            return json.loads(f.read_text())
        except json.JSONDecodeError as e:
            return {"unreadable": str(e)}
    return f.read_text(errors="replace")[-4000:]


def fold(stage: Path, step: str, rc: int | None, seconds: float, files: list[Path],
         cap_s: int | None = None, required: bool = True, skipped: str | None = None) -> dict:
    body = load(stage)
    body.pop("stamp", None)
    entry: dict = {"verdict": verdict(rc, skipped), "rc": rc, "seconds": seconds,
                   "cap_s": cap_s, "required": required, "files": {}}
    if skipped is not None:
        entry["skip_reason"] = skipped
    for f in files:
        entry["files"][f.name] = _file_entry(f)
    body.setdefault("steps", {})[step] = entry
    body.update(stage_verdict(body["steps"]))
    write_result(stage, body)
    return body


def summarize(out_dir: Path, stages: str, wall_s: float) -> dict:
    from benchmark.gpu.plan import time_plan

    found = sorted(out_dir.glob("stage*.json"))
    bodies = {f.stem: load(f) for f in found}
    ran = any(s.get("verdict") != "skipped" for b in bodies.values()
              for s in b.get("steps", {}).values())
    ok = bool(found) and all(b.get("ok") is True for b in bodies.values())
    dry = bool(found) and not ran
    body = {"stages": stages, "wall_s": wall_s, "ok": None if dry else ok, "dry_run": dry,
            "stage_ok": {k: b.get("ok") for k, b in bodies.items()}, "plan": time_plan()}
    write_result(out_dir / "summary.json", body)
    return body


def summary_line(body: dict) -> str:
    """check.sh's last log line: the verdict and the time plan's arithmetic."""
    p = body["plan"]
    head = "dry run (nothing ran)" if body["dry_run"] else f"ok={body['ok']} {body['stage_ok']}"
    return (f"{head}; plan: start {p['machine_start_s']}s + check {p['check_s']}s + re-run "
            f"{p['rerun_s']}s = {p['start_check_rerun_s']}s of {p['device_time_s']}s, "
            f"fits={p['fits']}")


def main(argv: list[str] | None = None) -> int:
    a = sys.argv[1:] if argv is None else argv
    if a[:1] == ["--summary"] and len(a) == 4:
        body = summarize(Path(a[1]), a[2], float(a[3]))
        print(summary_line(body))
        return 0 if body["ok"] or body["dry_run"] else 1
    p = argparse.ArgumentParser(prog="python -m benchmark.gpu.collect", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stage")
    p.add_argument("step")
    p.add_argument("rc")
    p.add_argument("seconds", type=float)
    p.add_argument("files", nargs="*")
    p.add_argument("--cap", type=int, default=None)
    p.add_argument("--optional", action="store_true")
    p.add_argument("--skip", default=None, metavar="REASON")
    o = p.parse_args(a)
    rc = None if o.rc in ("", "null") else int(o.rc)
    fold(Path(o.stage), o.step, rc, o.seconds, [Path(x) for x in o.files], o.cap,
         not o.optional, o.skip)
    return 0


if __name__ == "__main__":
    sys.exit(main())
