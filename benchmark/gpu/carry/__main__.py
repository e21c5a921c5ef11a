"""python -m benchmark.gpu.carry {build,verify} OUT_DIR

build   downloads and trims the wheels into OUT_DIR/wheels, writes OUT_DIR/manifest.json
verify  size caps; install into a clean Python 3.12 environment holding only the GPU image's
        packages; SGLang's CUDA serving path for Qwen3 imports; the tiny model serves on the
        CPU from it; writes OUT_DIR/verify.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmark.gpu.carry.spec import ROOT

DEFAULT_OUT = ROOT / ".gpu-carry"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmark.gpu.carry", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=["build", "verify"])
    p.add_argument("out", nargs="?", default=str(DEFAULT_OUT), help="carry folder")
    p.add_argument("--python", default=None,
                   help="a Python 3.12 for verify (default: pyenv's 3.12, else python3.12)")
    p.add_argument("--env", default=None,
                   help="where verify keeps its image-like venv (default OUT/../.gpu-carry-env)")
    p.add_argument("--no-serve", action="store_true",
                   help="verify without the CPU serve from the carry (about a minute)")
    a = p.parse_args(argv)
    out = Path(a.out).resolve()
    if a.action == "build":
        from benchmark.gpu.carry.build import build

        build(out)
        return 0
    from benchmark.gpu.carry.verify import verify

    report = verify(out, python=a.python, env=Path(a.env) if a.env else None,
                    serve=not a.no_serve)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
