"""`--help` without importing SGLang, with every flag's default shown.

Importing `sglang.srt.server_args` imports torch, transformers and most of SGLang (about 20 s on
a CPU machine). SGLang's flags are therefore cached as data: what `ServerArgs.add_cli_args`
declares (names, defaults, choices, help), written from the installed SGLang into the user's
cache (`$XDG_CACHE_HOME/sglang-duet/sglang_flags-<release>.json`, default `~/.cache`), never
into the repository (the help text is SGLang's). The first `--help` uses the real parser and
writes it (`make venv` runs `python -m sglang_duet.cli_help --write` too); later ones build the
parser from the data plus the duet flags (which are cheap). A file for another release is
ignored, so an SGLang upgrade only costs one slow `--help`. `test/test_cli_help.py` pins the
data to the installed SGLang and the fast help to the real one, character for character.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from pathlib import Path
from typing import Any


def snapshot_path() -> Path | None:
    """The cache file for the installed SGLang release (None when SGLang is not installed)."""
    try:
        release = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sglang-duet" / f"sglang_flags-{release}.json"

HELP_FLAGS = ("-h", "--help")
BOOL_DEFAULT_SUFFIX = " (default: %(default)s)"  # BooleanOptionalAction's, Python <= 3.13


class DefaultsFormatter(argparse.HelpFormatter):
    """Appends `[default: X]` to every option's help that does not already show it (the duet
    flags write theirs in cli_args; SGLang's mostly do not)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = "[default:" in text or "%(default)" in text
        if shown or action.default is argparse.SUPPRESS or not action.option_strings:
            return text
        if isinstance(action, argparse._HelpAction):
            return text
        return f"{text} [default: %(default)s]"


def new_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog="python -m sglang_duet.launch_server",
        description="SGLang server with the DuetServe scheduler.",
        formatter_class=DefaultsFormatter,
    )


def optional_model_path(parser: argparse.ArgumentParser) -> None:
    """The embedded tiny model is the default without a GPU, so --model-path is optional."""
    for action in parser._actions:
        if action.dest == "model_path":
            action.required = False


def add_duet_flags(parser: argparse.ArgumentParser) -> None:
    from sglang_duet.args import DuetArgs
    from sglang_duet.server.config import ServeArgs

    DuetArgs.add_cli_args(parser)
    ServeArgs.add_cli_args(parser)


# ---- SGLang's flags as data ----------------------------------------------------------------


def _plain(value: Any) -> Any:
    """JSON for the data: tuples as lists, sets sorted (their order differs between runs)."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return value


def describe(parser: argparse.ArgumentParser) -> list[dict[str, Any]]:
    """Every option of `parser` (but -h) as what its help needs: names, nargs, default..."""
    out = []
    for a in parser._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        flags, text, kind = list(a.option_strings), a.help, "plain"
        if isinstance(a, argparse.BooleanOptionalAction):
            # Built from --x alone (it adds --no-x, and on some Pythons a default to the help):
            # kept as it was declared, so that rebuilding it gives the same help on any Python.
            kind = "bool_optional"
            flags = [f for f in flags if not (f.startswith("--no-") and "--" + f[5:] in flags)]
            text = (text or "").removesuffix(BOOL_DEFAULT_SUFFIX) if text is not None else None
        out.append({
            "flags": flags, "dest": a.dest, "nargs": a.nargs, "kind": kind,
            "default": _plain(a.default), "choices": _plain(a.choices),
            "metavar": _plain(a.metavar), "required": a.required, "help": text,
        })
    return out


def live_sglang_flags() -> dict[str, Any]:
    """SGLang's flags as the installed release declares them (imports SGLang: slow)."""
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return {"sglang": importlib.metadata.version("sglang"), "actions": describe(parser)}


def add_from_data(parser: argparse.ArgumentParser, actions: list[dict[str, Any]]) -> None:
    def same(value: Any) -> Any:  # argparse tells SUPPRESS by identity, not by value
        return argparse.SUPPRESS if value == argparse.SUPPRESS else value

    for d in actions:
        kw: dict[str, Any] = {"dest": d["dest"], "default": same(d["default"]),
                              "help": same(d["help"]), "required": d["required"]}
        if d["kind"] == "bool_optional":
            kw["action"] = argparse.BooleanOptionalAction
        elif d["nargs"] == 0:
            kw.update(action="store_const", const=True)
        else:
            metavar = d["metavar"]
            kw.update(nargs=d["nargs"], choices=d["choices"],
                      metavar=tuple(metavar) if isinstance(metavar, list) else metavar)
        parser.add_argument(*d["flags"], **kw)


def help_parser(snapshot: dict[str, Any]) -> argparse.ArgumentParser:
    """The launcher's parser for printing help only: SGLang's part from the data."""
    parser = new_parser()
    add_from_data(parser, snapshot["actions"])
    optional_model_path(parser)
    add_duet_flags(parser)
    return parser


def load_snapshot(path: Path | None = None) -> dict[str, Any] | None:
    """The data, when it describes the installed SGLang release; None otherwise."""
    try:
        path = path or snapshot_path()
        data = json.loads(path.read_text()) if path else None
        installed = importlib.metadata.version("sglang")
    except (OSError, ValueError, importlib.metadata.PackageNotFoundError):
        return None
    return data if isinstance(data, dict) and data.get("sglang") == installed else None


def write_snapshot(path: Path | None = None) -> Path | None:
    """Write the installed SGLang's flags to the cache (atomically); None if it cannot."""
    path = path or snapshot_path()
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(live_sglang_flags(), indent=0) + "\n")
        os.replace(tmp, path)
    except OSError:
        return None  # a read-only home: --help stays slow, nothing else changes
    return path


def print_fast_help(argv: list[str]) -> bool:
    """Print the help and return True when `argv` asks for it and the data fits the installed
    SGLang; False leaves it to the real parser."""
    if not any(a in HELP_FLAGS for a in argv):
        return False
    snapshot = load_snapshot()
    if snapshot is None:
        return False
    help_parser(snapshot).print_help()
    return True


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["--write"]:
        sys.exit("usage: python -m sglang_duet.cli_help --write   (caches SGLang's flags)")
    path = write_snapshot()
    if path is None:
        sys.exit("could not write the flag cache (SGLang not installed, or no writable cache)")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
