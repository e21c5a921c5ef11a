"""`--help` (#24 item 5): every flag, SGLang's too, shows its default; the help is printed without
importing SGLang (or torch), from a cache of the installed SGLang release's flags."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from helpers.server import ROOT, child_env
from sglang_duet import cli_help


@pytest.fixture(scope="module")
def live():
    return cli_help.live_sglang_flags()


SLOW_HELP = "from sglang_duet.launch_server import main\nmain(['--help'])"


@pytest.fixture(scope="module")
def slow_help(tmp_path_factory):
    """`--help` in a fresh process with an empty cache directory: (cache home, the process)."""
    home = tmp_path_factory.mktemp("slow_help")
    out = subprocess.run([sys.executable, "-c", SLOW_HELP], capture_output=True, text=True,
                         env={**child_env(), "XDG_CACHE_HOME": str(home)}, cwd=ROOT,
                         timeout=300)
    return home, out


@pytest.fixture(scope="module")
def cache(tmp_path_factory, live):
    """A fresh cache directory holding the flags written by `cli_help --write` (run here: the
    `live` fixture imported SGLang into this process already)."""
    home = tmp_path_factory.mktemp("cache")
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(home)
    try:
        cli_help.main(["--write"])
    finally:
        if saved is None:
            del os.environ["XDG_CACHE_HOME"]
        else:
            os.environ["XDG_CACHE_HOME"] = saved
    (path,) = (home / "sglang-duet").glob("sglang_flags-*.json")
    return home, path


def test_data_is_what_the_installed_sglang_declares(live, cache):
    saved = json.loads(cache[1].read_text())
    assert saved["sglang"] == live["sglang"]
    assert cache[1].name == f"sglang_flags-{live['sglang']}.json"
    assert saved["actions"] == json.loads(json.dumps(live["actions"]))
    assert cli_help.load_snapshot(cache[1]) == saved


def _sorted_set_choices(parser: argparse.ArgumentParser) -> None:
    for a in parser._actions:  # a set prints in a different order in every process
        if isinstance(a.choices, set | frozenset):
            a.choices = sorted(a.choices, key=str)


def test_fast_help_is_the_real_help(cache, monkeypatch):
    from sglang_duet.launch_server import build_parser

    monkeypatch.setenv("COLUMNS", "100")
    real = build_parser()
    _sorted_set_choices(real)
    fast = cli_help.help_parser(cli_help.load_snapshot(cache[1]))
    assert fast.format_help() == real.format_help()


def test_every_flag_shows_its_default(cache):
    parser = cli_help.help_parser(cli_help.load_snapshot(cache[1]))
    formatter = parser._get_formatter()
    missing = []
    for a in parser._actions:
        if not a.option_strings or argparse.SUPPRESS in (a.help, a.default) or isinstance(
                a, argparse._HelpAction):
            continue  # hidden, or a deprecated alias with no default of its own
        shown = formatter._expand_help(a) if a.help else ""
        if "default" not in shown.lower():
            missing.append(a.option_strings[0])
    assert missing == []
    text = parser.format_help()
    for flag in ("--model-path", "--chunked-prefill-size", "--grammar-backend", "--duet-mode",
                 "--duet-max-body-mb"):
        assert flag in text


def test_help_imports_neither_sglang_nor_torch(cache):
    code = ("import sys\nfrom sglang_duet.launch_server import main\ntry:\n    main(['--help'])\n"
            "except SystemExit as e:\n    code = e.code\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'sglang', 'torch'})\n"
            "print('EXIT', code, 'HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**child_env(), "XDG_CACHE_HOME": str(cache[0])}, cwd=ROOT,
                         timeout=120)
    assert "EXIT 0 HEAVY []" in out.stdout, out.stderr[-2000:]
    assert "--duet-tbt-slo-ms" in out.stdout and "[default: 100.0]" in out.stdout


def test_stale_data_leaves_the_help_to_the_real_parser(monkeypatch, tmp_path):
    stale = tmp_path / "flags.json"
    stale.write_text(json.dumps({"sglang": "0.0.0", "actions": []}))
    monkeypatch.setattr(cli_help, "snapshot_path", lambda: stale)
    assert cli_help.load_snapshot() is None
    assert cli_help.print_fast_help(["--help"]) is False
    assert cli_help.print_fast_help(["--port", "1"]) is False


def test_a_slow_help_writes_the_cache(slow_help, cache):
    """Without a cache the real parser prints the help and leaves the cache for the next one:
    the same flags as `--write` writes."""
    home, out = slow_help
    assert out.returncode == 0 and "--duet-tbt-slo-ms" in out.stdout, out.stderr[-2000:]
    (path,) = (home / "sglang-duet").glob("sglang_flags-*.json")
    assert cli_help.load_snapshot(path) == cli_help.load_snapshot(cache[1])
