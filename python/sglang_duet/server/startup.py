"""Start-up checks that SGLang makes late (after loading the model) or not at all.

Each returns None or the one-line reason, naming the flag; the launcher exits 2 with it before
any child process starts.
"""

from __future__ import annotations

import argparse
import errno
import os
import socket
import tempfile

GPU_BACKENDS = ("green-ctx", "libsmctrl")


def explicit_dests(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """Destinations of the options given on the command line, resolved by argparse itself (so
    `--max-total-tok` counts as `--max-total-tokens`, exactly as the real parse read it)."""
    saved = {a.dest: a.default for a in parser._actions}
    try:
        for a in parser._actions:
            a.default = argparse.SUPPRESS
        ns, _ = parser.parse_known_args(argv)
    finally:
        for a in parser._actions:
            a.default = saved[a.dest]
    return set(vars(ns))


def looks_like_path(name: str) -> bool:
    """A Hugging Face repo id is `org/name` (no leading `/`, `.` or `~`, at most one `/`)."""
    return os.path.isabs(name) or name.startswith((".", "~")) or name.count("/") > 1


def check_model_path(path: str | None) -> str | None:
    if path and looks_like_path(path) and not os.path.exists(os.path.expanduser(path)):
        return f"--model-path {path}: path does not exist"
    return None


def check_port(host: str, port: int) -> str | None:
    """Bind the HTTP port once (and let go) before anything is loaded."""
    family = socket.AF_INET6 if ":" in (host or "") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host or "0.0.0.0", int(port)))
        except OSError as e:
            why = "address already in use" if e.errno == errno.EADDRINUSE else e.strerror
            return f"--port {port}: cannot listen on {host}:{port} ({why})"
    return None


def check_calibration(value: str | None) -> str | None:
    if not value:
        return None
    from sglang_duet.latency import Calibration

    try:
        Calibration.load(value)
    except (OSError, ValueError, TypeError) as e:
        return f"--duet-calibration {value}: {e}"
    return None


def check_plan_log(prefix: str | None) -> str | None:
    if not prefix:
        return None
    directory = os.path.dirname(os.path.abspath(prefix))
    if not os.path.isdir(directory):
        return f"--duet-plan-log {prefix}: directory {directory} does not exist"
    try:  # a real file, so that a read-only file system is caught too (also for root)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        return f"--duet-plan-log {prefix}: directory {directory} is not writable ({e.strerror})"
    return None


def check_partition_backend(name: str, has_gpu: bool) -> str | None:
    """A named GPU backend must work here; only `auto` falls back."""
    if name not in GPU_BACKENDS:
        return None
    if not has_gpu:
        return (f"--duet-partition-backend {name}: needs a CUDA GPU and none is visible; "
                "use auto (falls back to none) or none")
    from sglang_duet.partition import get_backend

    ok, why = get_backend(name).available(0)
    return None if ok else f"--duet-partition-backend {name}: not usable here ({why})"


def check_grammar_backend(name: str | None, has_gpu: bool) -> str | None:
    """Without CUDA, a grammar backend that needs it would kill the scheduler on the first
    constrained request (sglang_duet.cpu explains why); refuse it before anything starts."""
    from sglang_duet.cpu import CPU_SETTINGS, CUDA_ONLY_GRAMMAR_BACKENDS

    if has_gpu or name not in CUDA_ONLY_GRAMMAR_BACKENDS:
        return None
    default = CPU_SETTINGS["grammar_backend"][0]
    return (f"--grammar-backend {name}: needs a CUDA device (its token mask is applied with a "
            f"CUDA kernel) and none is visible; use {default} (the CPU default) or outlines")


def check_keys(api_key: str | None, admin_api_key: str | None,
               tokenizer_worker_num: int | None) -> str | None:
    """SGLang installs its API-key check only with one tokenizer worker: with more, an
    --api-key fails later in each worker, and an --admin-api-key alone is not checked at all
    (the admin routes answer without a key). Refuse the combination before anything starts."""
    if (api_key or admin_api_key) and int(tokenizer_worker_num or 1) > 1:
        flag = "--api-key" if api_key else "--admin-api-key"
        return (f"{flag}: SGLang checks keys only with --tokenizer-worker-num 1 (got "
                f"{tokenizer_worker_num}); with more, requests would not be checked")
    return None
