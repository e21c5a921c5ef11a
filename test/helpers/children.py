"""Targets for child processes the tests start (importable by name in a spawned or forked child)."""

from __future__ import annotations

import json
import os


def write_env_and_title(path: str, keys: list[str]) -> None:
    """Write the child's values of `keys` and, after setting it, its process title, to `path`."""
    import setproctitle

    setproctitle.setproctitle("sglang::test-child")
    with open("/proc/self/cmdline", "rb") as f:
        title = f.read().split(b"\0")[0].decode()
    with open(path, "w") as f:
        json.dump({"env": {k: os.environ.get(k) for k in keys}, "title": title}, f)
