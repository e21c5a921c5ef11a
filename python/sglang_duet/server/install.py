"""Wire the middleware, the lifecycle and the child entry points into SGLang's launch_server.

Every SGLang name touched from the launcher is here (README "Reliability" lists them):
- `app.add_middleware` on `sglang.srt.entrypoints.http_server.app` (FastAPI public API);
- `launch_server(init_tokenizer_manager_func=, run_scheduler_process_func=,
  run_detokenizer_process_func=, launch_callback=)` (its documented hooks);
- `TokenizerManager.signal_handler_class` (instance attribute, set after construction): SGLang
  installs `sigterm_handler` / `running_phase_sigquit_handler` of that class on its first
  request; ours forward to `Lifecycle`;
- without a CUDA device and with `--dp-size 1`: `sglang.srt.entrypoints.engine.
  _set_envs_and_config` wrapped in this launcher process (its module global, called by
  `Engine._launch_subprocesses` before it starts the children with `mp.Process`), to set the
  forkserver start method after SGLang's spawn (`children_from_forkserver`);
- with `--dp-size > 1` and a `--duet-router` of ours: `sglang.srt.entrypoints.engine.
  run_data_parallel_controller_process` rebound in this launcher process only (its module
  global, read by `launch_server` when it spawns the controller), to `runtime.dispatch`'s
  subclass of SGLang's `DataParallelController` (its per-request dispatch, and with
  `--sleep-on-idle` its `event_loop`, which reads `recv_from_tokenizer`, `soft_watchdog` and
  `_request_dispatcher`);
- read before start-up: the resolved `ServerArgs` (`dataclasses.fields` and the values of the
  secret ones, `redact.py`; `expert_distribution_recorder_mode`, `enable_memory_saver`,
  `refusals`);
- read after start-up: `_global_state.tokenizer_manager` (.max_req_input_len, .tokenizer,
  .model_config.vocab_size / .hidden_size for the index checks, ._subprocess_watchdog, stopped
  because our own poll replaces it and the drain stops children that it would report as
  crashed);
- read by the tests only: `app.routes` (FastAPI `APIRoute.methods`, `.path`,
  `.dependant.body_params`), the routes that take a body (`body_routes`), which the middleware
  must all cover.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from sglang_duet.index_checks import ModelBounds
from sglang_duet.server.config import ServeArgs
from sglang_duet.server.lifecycle import ChildEntry, Lifecycle
from sglang_duet.server.middleware import DuetMiddleware
from sglang_duet.server.redact import Redactor
from sglang_duet.server.state import ServerState

logger = logging.getLogger("sglang_duet.server")


def init_tokenizer_manager(life: Lifecycle, server_args, port_args):
    from sglang.srt.entrypoints.engine import init_tokenizer_manager as sglang_init

    tokenizer_manager, template_manager = sglang_init(server_args, port_args)
    tokenizer_manager.signal_handler_class = life.handler_class()
    return tokenizer_manager, template_manager


def max_token_chars(tokenizer: Any) -> int | None:
    """Longest vocabulary entry in characters: a byte-level token string has one character per
    byte, so no token decodes to more characters than this (an upper bound per token)."""
    try:
        return max(len(t) for t in tokenizer.get_vocab())
    except Exception:
        return None


def on_ready(life: Lifecycle, state: ServerState) -> None:
    """launch_server's callback once the server serves: watch the children, learn the limits."""
    import psutil
    from sglang.srt.entrypoints.http_server import _global_state

    tm = _global_state.tokenizer_manager
    watchdog = getattr(tm, "_subprocess_watchdog", None)
    if watchdog is not None:
        watchdog.stop()
    state.max_prompt_tokens = getattr(tm, "max_req_input_len", None)
    state.max_token_chars = max_token_chars(getattr(tm, "tokenizer", None))
    state.bounds = model_bounds(getattr(tm, "model_config", None))
    children = []
    for c in psutil.Process().children(recursive=True):  # forked ones: the fork server's
        try:
            if c.cmdline() and c.cmdline()[0].startswith("sglang::"):
                children.append(c)
        except psutil.Error:
            continue
    life.watch(children)
    state.ready = True
    logger.info("limits: prompts up to %s tokens (text over %s chars/token rejected before "
                "tokenizing); %s", state.max_prompt_tokens, state.max_token_chars, state.bounds)


def model_bounds(model_config: Any) -> ModelBounds | None:
    """The served model's vocabulary (token ids are indices below it) and hidden size."""
    vocab = getattr(model_config, "vocab_size", None)
    if not isinstance(vocab, int) or vocab <= 0:
        return None
    hidden = getattr(model_config, "hidden_size", None)
    return ModelBounds(vocab, hidden if isinstance(hidden, int) and hidden > 0 else None)


def body_routes(app: Any) -> dict[str, frozenset[str]]:
    """path -> methods of every route of SGLang's app that takes a request body (FastAPI's
    body parameters), with the methods that carry one. The middleware covers every POST, PUT
    and PATCH, so each of these (and any route a later SGLang adds) gets its protections."""
    out: dict[str, frozenset[str]] = {}
    for route in getattr(app, "routes", ()):
        dependant = getattr(route, "dependant", None)
        if dependant is None or not dependant.body_params:
            continue
        out[route.path] = frozenset(route.methods or ())
    return out


# Requests that SGLang 0.5.17 forwards to the scheduler, where they raise and end the whole
# server, unless the server was started with a flag: path -> (ServerArgs field, flag).
# - the expert-distribution routes: without a recorder mode, the scheduler's no-op recorder
#   raises on each of them;
# - /resume_memory_occupation raises (KeyError) unless the same tags were released first; and
#   without the memory saver neither route frees or restores anything, so both are refused.
NEEDS_FLAG = {
    **{path: ("expert_distribution_recorder_mode", "--expert-distribution-recorder-mode")
       for path in ("/start_expert_distribution_record", "/stop_expert_distribution_record",
                    "/dump_expert_distribution_record")},
    **{path: ("enable_memory_saver", "--enable-memory-saver")
       for path in ("/release_memory_occupation", "/resume_memory_occupation")},
}


def refusals(server_args: Any) -> dict[str, str]:
    """path -> the 400 message, for each NEEDS_FLAG route whose flag this server lacks."""
    return {path: f"{path} needs the server started with {flag} (it was not)"
            for path, (field, flag) in NEEDS_FLAG.items()
            if not getattr(server_args, field, None)}


def launch_kwargs(app: Any, serve: ServeArgs, scheduler_func: Any,
                  server_args: Any = None) -> dict[str, Any]:
    """Install the middleware on `app`; the keyword arguments for SGLang's launch_server."""
    from sglang.srt.managers.detokenizer_manager import run_detokenizer_process

    state = ServerState()
    if server_args is not None:
        state.redactor = Redactor.for_server(server_args)
        state.refused = refusals(server_args)
        state.api_key = getattr(server_args, "api_key", None)
    life = Lifecycle(state, serve.drain_timeout_s)
    app.add_middleware(DuetMiddleware, limits=serve, state=state, on_startup=life.attach)
    return {
        "init_tokenizer_manager_func": functools.partial(init_tokenizer_manager, life),
        "run_scheduler_process_func": ChildEntry(scheduler_func),
        "run_detokenizer_process_func": ChildEntry(run_detokenizer_process),
        "launch_callback": functools.partial(on_ready, life, state),
    }


def children_from_forkserver() -> None:
    """Fork SGLang's children from the preloaded fork server (`server/forkserver.py`): SGLang
    sets the spawn start method in `engine._set_envs_and_config` just before it starts them, so
    the forkserver method is set right after it (module global, this launcher process only)."""
    import multiprocessing

    import sglang.srt.entrypoints.engine as engine

    original = engine._set_envs_and_config

    def then_forkserver(server_args: Any) -> None:
        original(server_args)
        multiprocessing.set_start_method("forkserver", force=True)

    engine._set_envs_and_config = then_forkserver


def install_router(app: Any, server_args: Any, duet_args: dict) -> None:
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
