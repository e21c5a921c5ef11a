"""Children forked from a preloaded fork server on a CPU machine (server/forkserver.py): when it
is used, the environment and title a forked child gets, and that nothing outlives the launcher."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil
import pytest

from sglang_duet.server import forkserver
from sglang_duet.server.lifecycle import ChildEntry


@pytest.mark.parametrize(("argv", "gpu", "expected"), [
    (["--chunked-prefill-size", "64"], False, True),
    ([], True, False),  # SGLang's spawn, unchanged, with a CUDA device
    (["--dp-size", "2"], False, False),
    (["--dp-size=2"], False, False),
    (["--data-parallel-size", "4"], False, False),
    (["--dp-size", "1", "--tp-size", "2"], False, True),
])
def test_wanted_only_on_the_cpu_without_data_parallelism(argv, gpu, expected, monkeypatch):
    monkeypatch.delenv(forkserver.OPT_OUT, raising=False)
    assert forkserver.wanted(argv, gpu) is expected


def test_opt_out_and_parsed_dp_size(monkeypatch):
    monkeypatch.setenv(forkserver.OPT_OUT, "1")
    assert not forkserver.wanted([], False)
    assert forkserver.usable(SimpleNamespace(dp_size=1))
    assert not forkserver.usable(SimpleNamespace(dp_size=2))


def test_a_forked_child_gets_the_environment_of_its_start_and_keeps_its_title(tmp_path,
                                                                            monkeypatch):
    """The fork server keeps the environment of its own start; ChildEntry hands the child the
    parent's at `Process.start` (a variable set later, one removed later), key by key, so that
    SGLang's setproctitle still works in the child (os.environ.clear() breaks it)."""
    monkeypatch.setenv("DUET_T_GONE", "1")
    ctx = multiprocessing.get_context("forkserver")
    multiprocessing.forkserver.ensure_running()  # its environment: DUET_T_GONE, no DUET_T_NEW
    monkeypatch.setenv("DUET_T_NEW", "later")
    monkeypatch.delenv("DUET_T_GONE")
    from helpers.children import write_env_and_title

    out = tmp_path / "child.json"
    p = ctx.Process(target=ChildEntry(write_env_and_title),
                    args=(str(out), ["DUET_T_NEW", "DUET_T_GONE"]))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    got = json.loads(out.read_text())
    assert got == {"env": {"DUET_T_NEW": "later", "DUET_T_GONE": None},
                   "title": "sglang::test-child"}


def test_the_fork_server_dies_with_the_launcher_while_it_still_imports():
    """A launcher that exits during start-up leaves no fork server importing on behind it (its
    preload takes seconds; die_with_parent ends it at once)."""
    code = ("import os, psutil\n"
            "from sglang_duet.server import forkserver\n"
            "forkserver.start()\n"
            "print([c.pid for c in psutil.Process().children()"
            " if 'forkserver' in ' '.join(c.cmdline())][0], flush=True)\n"
            "os._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    pid = int(out.stdout.split()[-1])
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        pytest.fail("the fork server outlived its launcher by 3 s")


@pytest.mark.server
def test_a_cpu_servers_children_are_forked_from_its_fork_server(duet_server):
    launcher = psutil.Process(duet_server.proc.pid)
    kids = {c.cmdline()[0]: c for c in launcher.children(recursive=True) if c.cmdline()}
    sched, detok = kids["sglang::scheduler"], kids["sglang::detokenizer"]
    server = sched.parent()
    assert detok.parent().pid == server.pid != launcher.pid
    assert "multiprocessing.forkserver" in " ".join(server.cmdline())
    assert server.parent().pid == launcher.pid
    with open(f"/proc/{server.pid}/status") as f:  # a SIGTERM to the group leaves it to the drain
        ignored = int(next(ln for ln in f if ln.startswith("SigIgn:")).split()[1], 16)
    assert ignored >> (signal.SIGTERM - 1) & 1 and ignored >> (signal.SIGINT - 1) & 1
