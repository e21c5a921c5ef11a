"""python -m sglang_duet.launch_server [every SGLang flag] [--duet-* flags]

Starts SGLang's HTTP server, tokenizer manager and detokenizer unchanged, and runs the scheduler
process as DuetScheduler by handing SGLang's launcher our scheduler-process function. Stock
`python -m sglang.launch_server` in the same environment is not affected.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys

from sglang_duet.args import DuetArgError, DuetArgs
from sglang_duet.cpu import apply_cpu_settings, bind_cpu_threads, cuda_available

logger = logging.getLogger("sglang_duet.launch_server")

# Flags the duet loop needs, whatever the user asked: it runs its own synchronous loop (decode
# and prefill launched back to back, results processed after both), like SGLang's pdmux loop.
DUET_REQUIRED = {
    "disable_overlap_schedule": (True, "the duet loop launches decode and prefill itself"),
    "enable_mixed_chunk": (True, "aggregated plans run SGLang's mixed chunked-prefill batches"),
}


def build_parser() -> argparse.ArgumentParser:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(
        prog="python -m sglang_duet.launch_server",
        description="SGLang server with the DuetServe scheduler.",
    )
    ServerArgs.add_cli_args(parser)
    for action in parser._actions:
        if action.dest == "model_path":
            action.required = False  # the embedded tiny model is the default without a GPU
    DuetArgs.add_cli_args(parser)
    return parser


def explicit_dests(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """Destinations of the options that appear on the command line."""
    found = set()
    options = parser._option_string_actions
    for tok in argv:
        if not tok.startswith("-"):
            continue
        name = tok.split("=", 1)[0]
        if name in options:
            found.add(options[name].dest)
    return found


def resolve(argv: list[str]):
    """Parse and resolve argv into (ServerArgs, DuetArgs); exits with status 2 on a bad flag."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(ns.log_level).upper(), logging.INFO),
        format="[%(asctime)s] %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
    )
    try:
        duet = DuetArgs.from_cli_args(ns)
    except DuetArgError as e:
        parser.exit(2, f"{parser.prog}: error: {e}\n")
    explicit = explicit_dests(parser, argv)
    has_gpu = cuda_available()
    if not has_gpu:
        logger.info("no CUDA device: applying the CPU serving settings")
        apply_cpu_settings(ns, explicit)
        bind_cpu_threads(int(ns.tp_size or 1))
    if ns.model_path is None:
        if has_gpu:
            parser.exit(2, f"{parser.prog}: error: --model-path is required on a GPU machine\n")
        from sglang_duet.tiny_model import default_model_path

        ns.model_path = str(default_model_path())
        logger.info("no --model-path: serving the embedded tiny model at %s", ns.model_path)
    for dest, (value, why) in DUET_REQUIRED.items():
        if dest in explicit and getattr(ns, dest) != value:
            logger.warning("duet: overriding %s=%r (%s)", dest, getattr(ns, dest), why)
        setattr(ns, dest, value)
    from sglang.srt.server_args import ServerArgs

    return ServerArgs.from_cli_args(ns), duet


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    server_args, duet = resolve(argv)
    from sglang.srt.entrypoints.http_server import app, launch_server
    from sglang.srt.utils import kill_process_tree

    from sglang_duet import validation
    from sglang_duet.runtime.process import run_duet_scheduler_process

    logger.info("duet: %s", duet.to_dict())
    validation.install(app)
    _install_router(app, server_args, duet.to_dict())
    try:
        launch_server(
            server_args,
            run_scheduler_process_func=functools.partial(
                run_duet_scheduler_process, duet.to_dict()
            ),
        )
    finally:
        kill_process_tree(os.getpid(), include_parent=False)


def _install_router(app, server_args, duet_args: dict) -> None:
    """The /get_load the gateway reads, and, with --dp-size > 1, our dispatch in SGLang's
    data-parallel controller (swapped in this launcher process only; stock SGLang elsewhere in
    the environment is untouched)."""
    from sglang_duet.runtime import gateway_load

    gateway_load.install(app, duet_args, server_args)
    if server_args.dp_size > 1 and duet_args["router"] != "sglang":
        import sglang.srt.entrypoints.engine as engine

        from sglang_duet.runtime.dispatch import run_duet_dp_controller_process

        engine.run_data_parallel_controller_process = functools.partial(
            run_duet_dp_controller_process, duet_args
        )


if __name__ == "__main__":
    main()
