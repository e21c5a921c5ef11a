"""Verifies a carry folder on the CPU, the way the GPU machine will use it.

1. sizes: the folder <= MAX_CARRY_BYTES, and folder + the repository's tracked files <=
   CALL_BUDGET_BYTES (60 MiB, under the device tool's 64 MiB per call; the same cap CI checks
   with the size build recorded in carry_size.json);
2. install: a Python 3.12 venv holding only the image's packages (image_packages.txt, at the
   versions seen there; the ones the carried wheels ask for), then
   `pip install --no-index --no-deps --target SITE wheels/*.whl`, exactly as check.sh does;
3. requirements: every Requires-Dist of every carried wheel is met by the carry, by the image
   (version checked where the image's is known), or is reported as not carried;
4. imports: `imports.MODULES` (SGLang's CUDA serving path for Qwen3 and ours) import in that
   venv with SITE alone on the path (`imports.py` names what cannot load without a device);
5. serve: `smoke.serve_smoke`, the tiny model served on the CPU from SITE in that venv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path

from benchmark.gpu.carry.imports import MODULES
from benchmark.gpu.carry.smoke import serve_smoke
from benchmark.gpu.carry.spec import (
    ACCEPTED_CONFLICTS,
    CALL_BUDGET_BYTES,
    MAX_CARRY_BYTES,
    MIB,
    ROOT,
    image_packages,
    norm_name,
)
from benchmark.stamp import write_result

# Always in the image venv: what SGLang imports unconditionally that no Requires-Dist names,
# and what check.sh's steps need (the image has pytest, hypothesis and matplotlib).
IMAGE_BASE = ("torch", "triton", "torchvision", "numpy", "requests", "pyyaml", "pillow",
              "psutil", "packaging", "setuptools", "pytest", "hypothesis", "matplotlib")


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def tree_bytes() -> int:
    """Bytes of the repository's tracked files (what travels with every device call)."""
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                         check=True).stdout.decode()
    return sum((ROOT / f).stat().st_size for f in out.split("\0") if f and (ROOT / f).is_file())


def wheel_metadata(whl: Path) -> dict:
    with zipfile.ZipFile(whl) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        msg = Parser().parsestr(z.read(name).decode())
    return {"name": norm_name(msg["Name"]), "version": msg["Version"],
            "requires": msg.get_all("Requires-Dist") or []}


def check_requirements(wheels: list[dict], image: dict[str, str | None]) -> dict:
    """Each carried wheel's requirements (markers for Linux x86_64 CPython 3.12, no extras)."""
    from packaging.requirements import Requirement

    env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython",
           "extra": ""}
    carried = {w["name"]: w["version"] for w in wheels}
    rows = {"carried": [], "image": [], "image_version_unknown": [], "conflict": [],
            "accepted_conflict": [], "not_carried": []}
    for w in wheels:
        for spec in w["requires"]:
            req = Requirement(spec)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            name = norm_name(req.name)
            row = f"{w['name']} -> {req}"
            if name in carried:
                ok = req.specifier.contains(carried[name], prereleases=True)
                rows["carried" if ok else "conflict"].append(row + f" (carried {carried[name]})")
            elif name in image:
                version = image[name]
                if version is None:
                    rows["image_version_unknown"].append(row)
                elif req.specifier.contains(version, prereleases=True):
                    rows["image"].append(row + f" (image {version})")
                else:
                    kind = "accepted_conflict" if name in ACCEPTED_CONFLICTS else "conflict"
                    rows[kind].append(row + f" (image {version})")
            else:
                rows["not_carried"].append(row)
    return rows


def find_python312(python: str | None) -> str:
    candidates = [python] if python else [
        os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3.12"),
        shutil.which("python3.12") or "", "/usr/bin/python3.12"]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            out = subprocess.run([c, "-c", "import sys; print(sys.version_info[:2])"],
                                 capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip() == "(3, 12)":
                return c
    raise SystemExit("verify needs a Python 3.12 (pyenv install 3.12, or --python PATH)")


def _clean_env() -> dict[str, str]:
    """This process's environment without its Python path (the venv must see only itself)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def image_env(env: Path, python: str, wanted: list[str], log=print) -> Path:
    """A venv with only `wanted` image packages (pinned where the image's version is known);
    reused while the wanted list is unchanged. Returns its python."""
    py = env / "bin" / "python"
    stamp = env / ".image-packages"
    if py.exists() and stamp.exists() and stamp.read_text() == "\n".join(wanted):
        return py
    if not py.exists():  # an existing venv only gets what is new (torch alone is ~4 GB)
        subprocess.run([python, "-m", "venv", str(env)], check=True, env=_clean_env())
    log(f"[carry] image venv {env}: installing {len(wanted)} image packages")
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    *wanted], check=True, env=_clean_env())
    stamp.write_text("\n".join(wanted))
    return py


def wanted_image_packages(wheels: list[dict], image: dict[str, str | None]) -> list[str]:
    names = set(IMAGE_BASE)
    for w in wheels:
        for spec in w["requires"]:
            if "extra ==" in spec:
                continue
            name = norm_name(spec.split(";")[0].split("[")[0].split("=")[0].split("<")[0]
                             .split(">")[0].split("!")[0].split("~")[0].strip())
            if name in image:
                names.add(name)
    carried = {w["name"] for w in wheels}
    return sorted(f"{n}=={image[n]}" if image[n] else n for n in names - carried)


def run_imports(py: Path, site: Path) -> dict:
    env = _clean_env()
    env.update(PYTHONPATH=str(site), HF_HUB_OFFLINE="1", CUDA_VISIBLE_DEVICES="")
    probe = Path(__file__).with_name("imports.py")
    out = subprocess.run([str(py), str(probe), *MODULES], capture_output=True, text=True,
                         env=env, timeout=900, cwd=tempfile.gettempdir())
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": out.stderr[-3000:], "modules": {}}


def verify(out: Path, python: str | None = None, env: Path | None = None, serve: bool = True,
           log=print) -> dict:
    wheel_paths = sorted((out / "wheels").glob("*.whl"))
    if not wheel_paths:
        raise SystemExit(f"{out}/wheels holds no wheels: run `python -m benchmark.gpu.carry "
                         f"build {out}` first")
    carry_b, tree_b = folder_bytes(out / "wheels"), tree_bytes()
    sizes = {"carry_bytes": carry_b, "carry_mib": round(carry_b / MIB, 2),
             "tree_bytes": tree_b, "call_mib": round((carry_b + tree_b) / MIB, 2),
             "call_budget_bytes": CALL_BUDGET_BYTES,
             "ok": carry_b <= MAX_CARRY_BYTES and carry_b + tree_b <= CALL_BUDGET_BYTES}
    log(f"[carry] size {sizes['carry_mib']} MiB; with the tree {sizes['call_mib']} MiB")
    image = image_packages()
    wheels = [wheel_metadata(p) for p in wheel_paths]
    reqs = check_requirements(wheels, image)
    py312 = find_python312(python)
    wanted = wanted_image_packages(wheels, image)
    py = image_env(env or out.parent / ".gpu-carry-env", py312, wanted, log)
    with tempfile.TemporaryDirectory(prefix="carry-site-") as tmp:
        site = Path(tmp) / "site"
        inst = subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--no-deps",
                               "--no-compile", "--disable-pip-version-check", "--quiet",
                               "--target", str(site), *map(str, wheel_paths)],
                              capture_output=True, text=True, env=_clean_env())
        install = {"rc": inst.returncode, "stderr": inst.stderr[-2000:],
                   "site_mib": round(folder_bytes(site) / MIB, 1) if site.exists() else 0}
        log(f"[carry] install rc={inst.returncode}, {install['site_mib']} MiB unpacked")
        imports = run_imports(py, site) if inst.returncode == 0 else {"modules": {}}
        failed = [m for m, r in imports.get("modules", {}).items() if not r["ok"]]
        # a trimmed extension module loaded means a trim cut something the path uses
        dropped_loaded = imports.get("loaded_dropped", [])
        smoke = serve_smoke(py, site) if serve and imports.get("modules") and not failed else {
            "ok": not serve, "skipped": "not asked (--no-serve)" if not serve else "imports"}
        log(f"[carry] CPU serve from the carry: {smoke}"[:400])
    for m in failed:
        log(f"[carry] import FAILED {m}: {imports['modules'][m]['error']}")
    report = {
        "ok": bool(sizes["ok"] and install["rc"] == 0 and not reqs["conflict"]
                   and imports.get("modules") and not failed and not dropped_loaded
                   and smoke["ok"]),
        "sizes": sizes, "python": py312, "image_packages_installed": wanted,
        "install": install, "requirements": reqs, "imports": imports, "failed_imports": failed,
        "dropped_but_loaded": dropped_loaded,
        "serve_smoke": smoke, "accepted_conflicts": ACCEPTED_CONFLICTS,
    }
    write_result(out / "verify.json", report)
    log(f"[carry] verify ok={report['ok']}: {len(imports.get('modules', {})) - len(failed)}/"
        f"{len(imports.get('modules', {}))} modules import, {len(reqs['conflict'])} conflicts, "
        f"{len(reqs['not_carried'])} requirements not carried (see verify.json)")
    return report
