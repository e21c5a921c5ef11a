"""Run a `main(argv)` entry point in process and capture what it printed."""

from __future__ import annotations

from collections.abc import Callable, Sequence


def run_cli(main: Callable[[Sequence[str]], int], capsys, argv: Sequence[str]
            ) -> tuple[int, str, str]:
    """(exit code, stdout, stderr); argparse's SystemExit counts as the exit code."""
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse errors
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err
