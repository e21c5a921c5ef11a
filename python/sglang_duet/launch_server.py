"""python -m sglang_duet.launch_server [every SGLang flag] [--duet-* flags]

Starts SGLang's HTTP server, tokenizer manager and detokenizer unchanged, and runs the scheduler
process as DuetScheduler by handing SGLang's launcher our scheduler-process function. Around
them it adds what `sglang_duet.server` provides (request limits and checks, SIGTERM drain, a
clean end when a child dies) and checks the flags SGLang would check late or not at all. Stock
`python -m sglang.launch_server` in the same environment is not affected.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys

from sglang_duet import cli_help
from sglang_duet.args import DuetArgError, DuetArgs
from sglang_duet.cpu import apply_cpu_settings, bind_cpu_threads, cuda_available
from sglang_duet.server import forkserver, startup
from sglang_duet.server.config import ServeArgs

logger = logging.getLogger("sglang_duet.launch_server")

# Flags the duet loop needs, whatever the user asked: it runs its own synchronous loop (decode
# and prefill launched back to back, results processed after both), like SGLang's pdmux loop.
DUET_REQUIRED = {
    "disable_overlap_schedule": (True, "the duet loop launches decode and prefill itself"),
    "enable_mixed_chunk": (True, "aggregated plans run SGLang's mixed chunked-prefill batches"),
}
# The name /v1/models lists for the embedded tiny model (instead of its cache path).
TINY_MODEL_NAME = "default"


def build_parser() -> argparse.ArgumentParser:
    from sglang.srt.server_args import ServerArgs

    parser = cli_help.new_parser()
    ServerArgs.add_cli_args(parser)
    cli_help.optional_model_path(parser)
    cli_help.add_duet_flags(parser)
    return parser


def _fail(parser: argparse.ArgumentParser, reason: str | None) -> None:
    if reason:
        parser.exit(2, f"{parser.prog}: error: {reason}\n")


def _no_cuda_settings(ns: argparse.Namespace, explicit: set[str]) -> None:
    logger.info("no CUDA device: applying the CPU serving settings")
    apply_cpu_settings(ns, explicit)
    bind_cpu_threads(int(ns.tp_size or 1))
    # No CUDA, no CUDA coredump to wait for if a child fails.
    os.environ.setdefault("SGLANG_CUDA_COREDUMP_BEFORE_CRASH", "false")


def resolve(argv: list[str]):
    """Parse and check argv into (ServerArgs, DuetArgs, ServeArgs); exits 2 on a bad flag."""
    if cli_help.print_fast_help(argv):  # before SGLang is imported (seconds instead of ~20 s)
        sys.exit(0)
    parser = build_parser()
    if any(a in cli_help.HELP_FLAGS for a in argv):
        cli_help.write_snapshot()  # the next --help is fast
    ns = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(ns.log_level).upper(), logging.INFO),
        format="[%(asctime)s] %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
    )
    try:
        duet = DuetArgs.from_cli_args(ns)
        serve = ServeArgs.from_cli_args(ns)
    except DuetArgError as e:
        _fail(parser, str(e))
    explicit = startup.explicit_dests(parser, argv)
    has_gpu = cuda_available()
    _fail(parser, startup.check_partition_backend(duet.partition_backend, has_gpu))
    _fail(parser, startup.check_calibration(duet.calibration))
    _fail(parser, startup.check_plan_log(duet.plan_log))
    _fail(parser, startup.check_model_path(ns.model_path))
    _fail(parser, startup.check_port(ns.host, ns.port))
    _fail(parser, startup.check_keys(ns.api_key, ns.admin_api_key, ns.tokenizer_worker_num))
    if not has_gpu:
        _no_cuda_settings(ns, explicit)
    _fail(parser, startup.check_grammar_backend(ns.grammar_backend, has_gpu))
    if ns.model_path is None:
        if has_gpu:
            _fail(parser, "--model-path is required on a GPU machine")
        from sglang_duet.tiny_model import default_model_path

        ns.model_path = str(default_model_path())
        if "served_model_name" not in explicit:
            ns.served_model_name = TINY_MODEL_NAME
        logger.info("no --model-path: serving the embedded tiny model at %s as %r",
                    ns.model_path, ns.served_model_name)
    for dest, (value, why) in DUET_REQUIRED.items():
        if dest in explicit and getattr(ns, dest) != value:
            logger.warning("duet: overriding %s=%r (%s)", dest, getattr(ns, dest), why)
        setattr(ns, dest, value)
    from sglang.srt.server_args import ServerArgs

    return ServerArgs.from_cli_args(ns), duet, serve


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    forked = (not any(a in cli_help.HELP_FLAGS for a in argv)
              and forkserver.wanted(argv, cuda_available()))
    if forked:  # its imports run beside ours (server/forkserver.py)
        forkserver.start()
    server_args, duet, serve = resolve(argv)
    from sglang.srt.entrypoints.http_server import app, launch_server
    from sglang.srt.utils import kill_process_tree

    from sglang_duet.runtime.process import run_duet_scheduler_process
    from sglang_duet.server.install import children_from_forkserver, install_router, launch_kwargs

    logger.info("duet: %s; serving: %s", duet.to_dict(), serve.to_dict())
    kwargs = launch_kwargs(app, serve,
                           functools.partial(run_duet_scheduler_process, duet.to_dict()),
                           server_args)
    install_router(app, server_args, duet.to_dict())
    if forked and forkserver.usable(server_args):
        children_from_forkserver()
    try:
        launch_server(server_args, **kwargs)
    finally:
        kill_process_tree(os.getpid(), include_parent=False)


if __name__ == "__main__":
    main()
