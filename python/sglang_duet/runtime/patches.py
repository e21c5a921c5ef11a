"""Every place sglang-duet replaces something of SGLang's at run time, in one module.

Upgrading SGLang starts here and at the contract table in docs/architecture.md (each name, its
file and function in SGLang 0.5.17, why, and the test that pins it). Each patch is either a
context manager that restores what it replaced when its block ends (also when the block raises),
or a start-up patch applied once in the scheduler child (processes are spawned, so a patch made
in the launcher never reaches the child). Nothing else in the package assigns to an SGLang
module, class or object attribute.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger(__name__)


# ---- generic ---------------------------------------------------------------------------------


@contextlib.contextmanager
def swapped(obj: Any, **attrs: Any) -> Iterator[None]:
    """Sets attributes of `obj` for the duration of the block and restores them afterwards."""
    saved = {name: getattr(obj, name) for name in attrs}
    for name, value in attrs.items():
        setattr(obj, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(obj, name, value)


def _wrap_once(module: Any, name: str, make: Any, tag: str) -> bool:
    """Replaces `module.name` by `make(original)` unless already done; True when applied."""
    original = getattr(module, name)
    if getattr(original, tag, False):
        return False
    wrapped = functools.wraps(original)(make(original))
    setattr(wrapped, tag, True)
    setattr(module, name, wrapped)
    return True


# ---- scheduler process ----------------------------------------------------------------------


def use_scheduler_class(cls: type) -> None:
    """SGLang's `run_scheduler_process` looks `Scheduler` up as a module global at call time."""
    import sglang.srt.managers.scheduler as sched_mod

    sched_mod.Scheduler = cls


@contextlib.contextmanager
def priority_already_computed(sched_policy: Any) -> Iterator[None]:
    """SGLang's prefill adder calls `SchedulePolicy.calc_priority` on the waiting queue; the duet
    scheduler already did (and prefix-matched) for its plan, so the adder skips that pass."""
    with swapped(sched_policy, calc_priority=_no_priority_pass):
        yield


def _no_priority_pass(*_args: Any, **_kwargs: Any) -> None:
    """Stands in for SchedulePolicy.calc_priority inside the adder pass."""


@contextlib.contextmanager
def grammar_queue_already_polled(grammar_manager: Any) -> Iterator[None]:
    """SGLang's prefill step first polls the grammar queue (up to SGLANG_GRAMMAR_POLL_INTERVAL
    while a grammar compiles); the duet scheduler already did, before planning, so the prefill
    step does not wait a second time in the same iteration."""
    with swapped(grammar_manager, has_waiting_grammars=_nothing_waiting):
        yield


def _nothing_waiting() -> bool:
    """Stands in for GrammarManager.has_waiting_grammars inside the prefill step."""
    return False


@contextlib.contextmanager
def results_skip_finished(sched: Any) -> Iterator[None]:
    """SGLang's batch result processor skips requests that already finished only in overlap
    mode; look-ahead needs that guard for the steps after a request's last one."""
    normal = sched.batch_result_processor
    with swapped(sched, batch_result_processor=_skipping_processor(normal)):
        yield


_SKIPPING: dict[int, Any] = {}


def _skipping_processor(normal: Any) -> Any:
    key = id(normal)
    if key not in _SKIPPING:
        _SKIPPING.clear()
        _SKIPPING[key] = dataclasses.replace(normal, enable_overlap=True)
    return _SKIPPING[key]


# ---- spatial phases ------------------------------------------------------------------------


@contextlib.contextmanager
def no_input_copy() -> Iterator[None]:
    """SGLang's eager runner reads SGLANG_EAGER_INPUT_NO_COPY per forward (from the environment):
    the spatial prefill runs on its batch's own tensors, not the buffers decode graphs share.
    SGLang's own `override` does not restore it when the block raises, hence this one."""
    from sglang.srt.environ import envs

    switch = envs.SGLANG_EAGER_INPUT_NO_COPY
    saved = os.environ.get(switch.name)
    switch.set(True)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(switch.name, None)
        else:
            os.environ[switch.name] = saved


@contextlib.contextmanager
def capture_on(stream: Any) -> Iterator[None]:
    """While active, SGLang's decode graph runner captures on `stream` (not a stream of its own).

    `DecodeCudaGraphRunner.capture` opens `graph_capture()` with no stream, which makes one; the
    module's name is rebound to a version that passes ours.
    """
    import sglang.srt.model_executor.runner.decode_cuda_graph_runner as dcgr

    original = dcgr.graph_capture

    def on_partition(*args: Any, **kwargs: Any) -> Any:
        if not args and kwargs.get("stream") is None:
            kwargs["stream"] = stream
        return original(*args, **kwargs)

    with swapped(dcgr, graph_capture=on_partition):
        yield


def side_stream_owners(model_runner: Any) -> list[Any]:
    """Objects whose `alt_stream` SGLang forks to while capturing: the KV pool (K/V writes) and
    model modules (e.g. MoE shared experts). Those streams belong to the primary context."""
    owners = []
    pool = getattr(model_runner, "token_to_kv_pool", None)
    if getattr(pool, "alt_stream", None) is not None:
        owners.append(pool)
    model = getattr(model_runner, "model", None)
    modules = model.modules() if hasattr(model, "modules") else ()
    owners.extend(m for m in modules if getattr(m, "alt_stream", None) is not None)
    return owners


@contextlib.contextmanager
def no_side_streams(model_runner: Any) -> Iterator[None]:
    """While active, SGLang captures without side streams (as it does under PD-multiplexing,
    `enable_alt_stream=not enable_pdmux`): kernels forked to a primary-context stream inside a
    partition capture would replay on every SM."""
    with contextlib.ExitStack() as stack:
        for owner in side_stream_owners(model_runner):
            stack.enter_context(swapped(owner, alt_stream=None))
        yield


# ---- tensor parallelism ----------------------------------------------------------------------


def request_prefill_tp_group() -> None:
    """SGLang builds a duplicate TP communicator for PD-multiplexing; ask its bootstrap for it
    (in the scheduler child, before the model runner starts) so the spatial prefill's
    all-reduces never share a communicator with the concurrent decode's."""
    import sglang.srt.distributed.bootstrap as bootstrap

    def make(original: Any) -> Any:
        def with_prefill_group(*args: Any, **kwargs: Any) -> Any:
            kwargs["duplicate_tp_group"] = True
            return original(*args, **kwargs)

        return with_prefill_group

    if _wrap_once(bootstrap, "initialize_model_parallel", make, "_duet"):
        logger.info("duet: a second TP communicator will be built for the prefill phase")


def has_prefill_tp_group() -> bool:
    import sglang.srt.distributed.parallel_state as ps

    return getattr(ps, "_PDMUX_PREFILL_TP_GROUP", None) is not None


@functools.cache
def clip_max_new_tokens() -> int:
    """The cap SGLang's prefill adder puts on a running request's output reservation (tokens,
    ``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION``, read once at SGLang's import, so cached here: the
    scheduler asks for it twice per iteration)."""
    from sglang.srt.managers.schedule_policy import CLIP_MAX_NEW_TOKENS

    return int(CLIP_MAX_NEW_TOKENS)


# SGLang's module-level groups that are the TP group itself unless DP attention, context or
# expert parallelism give them ranks of their own (`parallel_state.initialize_model_parallel`).
TP_ALIASES = ("_ATTN_TP", "_ATTN_CP", "_MOE_DP", "_MOE_EP", "_MOE_TP")


@contextlib.contextmanager
def prefill_tp_group(enabled: bool, model_runner: Any = None) -> Iterator[None]:
    """While active, every collective of a forward runs on the prefill phase's communicator.

    `set_pdmux_status` redirects `get_tp_group()` only; the attention all-reduce (through
    `get_attn_tp_group()`) and the MoE/CP getters read globals that are the decode's `_TP`
    without DP attention: rebound too. The sampler's `tp_sync_group` and the logits processor's
    multimem gatherer (the decode group's buffer) were fixed at construction: swapped too.
    """
    if not enabled:
        yield
        return
    import sglang.srt.distributed.parallel_state as ps

    decode, prefill = ps._TP, getattr(ps, "_PDMUX_PREFILL_TP_GROUP", None)
    with contextlib.ExitStack() as stack:
        if decode is not None and prefill is not None:
            aliases = {n: prefill for n in TP_ALIASES if getattr(ps, n, None) is decode}
            stack.enter_context(swapped(ps, **aliases))
            for owner, attrs in _cached_groups(model_runner, decode, prefill):
                stack.enter_context(swapped(owner, **attrs))
        ps.set_pdmux_status(True)
        stack.callback(ps.set_pdmux_status, False)
        yield


def _cached_groups(model_runner: Any, decode: Any, prefill: Any) -> list[tuple[Any, dict]]:
    """(object, {attribute: prefill value}) for what `model_runner` holds of the decode group."""
    out: list[tuple[Any, dict]] = []
    sampler = getattr(model_runner, "sampler", None)
    if getattr(sampler, "tp_sync_group", None) is decode.device_group:
        out.append((sampler, {"tp_sync_group": prefill.device_group}))
    out.extend((m, {"_logits_gatherer": _gather_on_current_group})
               for m in _gatherer_owners(getattr(model_runner, "model", None)))
    return out


_OWNERS: dict[int, tuple[Any, list[Any]]] = {}


def _gatherer_owners(model: Any) -> list[Any]:
    """The modules of `model` holding a logits gatherer, found once per model (a walk over a
    36-layer model's modules took 1.5 ms on the CPU, on every spatial prefill's launch path)."""
    hit = _OWNERS.get(id(model))
    if hit is None or hit[0] is not model:
        modules = model.modules() if hasattr(model, "modules") else ()
        _OWNERS.clear()
        hit = _OWNERS[id(model)] = (model, [m for m in modules
                                            if hasattr(m, "_logits_gatherer")])
    return hit[1]


def _gather_on_current_group(x: Any) -> Any:
    """Stands in for LogitsProcessor's multimem gatherer: SGLang's all-gather of the last dim
    over `get_tp_group()` (the prefill group inside `prefill_tp_group`)."""
    from sglang.srt.distributed import tensor_model_parallel_all_gather

    return tensor_model_parallel_all_gather(x, dim=-1)


# ---- start-up time ---------------------------------------------------------------------------

# The SGLang model module of the embedded tiny model (Qwen3ForCausalLM: models/qwen3.py).
TINY_MODEL_MODULES = ("qwen3",)


def skip_unused_model_modules(model_path: str | None) -> None:
    """Start-up, before SGLang's model registry is imported: serving the embedded tiny model,
    import only its own model module.

    `models/registry.py` imports every module of `sglang.srt.models` (~200, seconds of each
    scheduler child's start) to build its table, except those SGLANG_DISABLED_MODEL_ARCHS names
    (`import_model_classes`). Any other model, or a value already set, is left alone.
    """
    from sglang_duet.tiny_model import is_tiny_model

    if "SGLANG_DISABLED_MODEL_ARCHS" in os.environ or not is_tiny_model(model_path):
        return
    import importlib.util
    import pkgutil

    spec = importlib.util.find_spec("sglang.srt.models")
    others = [m.name for m in pkgutil.iter_modules(spec.submodule_search_locations)
              if not m.ispkg and m.name not in TINY_MODEL_MODULES]
    os.environ["SGLANG_DISABLED_MODEL_ARCHS"] = ",".join(others)


# ---- CPU serving (no CUDA device) -----------------------------------------------------------


def patch_rope_for_cpu() -> None:
    """Make SGLang's RotaryEmbedding take its native path on a CPU-only torch build.

    Its constructor imports vLLM's custom op on platforms it does not recognise; a CUDA build of
    torch with no device is such a platform. The native forward is what runs on the CPU anyway.
    """
    import torch

    if torch.cuda.is_available():
        return
    import sglang.srt.layers.rotary_embedding.base as rope_base

    if hasattr(rope_base, "_is_cpu"):
        rope_base._is_cpu = True


def no_torch_compile_on_cpu() -> None:
    """No CUDA device: run SGLang's `@torch.compile` functions eagerly.

    With TP > 1 the first forward calls `layers/vocab_parallel_embedding.py`,
    `get_masked_input_and_mask` (integer masks, exact either way), whose inductor compile on the
    CPU took 18 s of each TP=2 start on the 2-core machine (its vector-ISA probes build C++ with
    the host compiler, even on a cache hit). `torch._dynamo.config.disable` is read per call.
    """
    import torch

    if torch.cuda.is_available():
        return
    import torch._dynamo.config

    torch._dynamo.config.disable = True


def patch_tp_groups_for_cpu() -> None:
    """TP > 1 without a CUDA device: build SGLang's process groups without NCCL communicators.

    SGLang decides "CPU" from SGLANG_USE_CPU_ENGINE (whose kernels are not on PyPI), so with a
    CUDA build of torch and no device it still creates PyNccl and custom all-reduce
    communicators. Forcing them off leaves the gloo CPU group, which is what serves here.
    """
    import torch

    if torch.cuda.is_available():
        return
    import sglang.srt.distributed.parallel_state as ps

    def make(original: Any) -> Any:
        def init_group_without_nccl(*args: Any, **kwargs: Any) -> Any:
            kwargs["use_pynccl"] = False
            kwargs["use_custom_allreduce"] = False
            kwargs["use_mscclpp_allreduce"] = False
            kwargs["use_torch_symm_mem_allreduce"] = False
            return original(*args, **kwargs)

        return init_group_without_nccl

    _wrap_once(ps, "init_model_parallel_group", make, "_duet_cpu")


def single_node(server_args: Any) -> bool:
    """One node and no rendezvous address or override given: every rank runs on this machine."""
    return (int(getattr(server_args, "nnodes", 1) or 1) == 1
            and not getattr(server_args, "dist_init_addr", None)
            and not os.environ.get("SGLANG_DISTRIBUTED_INIT_METHOD_OVERRIDE"))


def store_on_loopback(server_args: Any, port: int) -> bool:
    """Start-up, scheduler child: torch.distributed's store on `port` (SGLang's `--nccl-port`)
    listens on 127.0.0.1 only, on one node. SGLang rendezvouses at tcp://HOST:PORT (HOST is the
    HTTP `--host`) and torch's store server binds every interface whatever HOST is; rank 0's
    store is given a socket already bound to loopback (`TCPStore(master_listen_fd=)`), and every
    rank connects to 127.0.0.1. Across nodes (`--nnodes > 1`, `--dist-init-addr`) other
    machines must reach it: SGLang's behaviour is kept. True when applied."""
    if not single_node(server_args):
        return False
    import importlib
    import socket

    from torch.distributed import TCPStore

    rdzv = importlib.import_module("torch.distributed.rendezvous")  # the module, not the function

    def make(original: Any) -> Any:
        def create_store(hostname: str, store_port: int, rank: int, world_size: int,
                         timeout: Any, use_libuv: bool = True) -> Any:
            if store_port != port:
                return original(hostname, store_port, rank, world_size, timeout, use_libuv)
            if rank != 0 or rdzv._torchelastic_use_agent_store() or not use_libuv:
                return original("127.0.0.1", port, rank, world_size, timeout, use_libuv)
            sock = socket.create_server(("127.0.0.1", port))  # SO_REUSEADDR, listening
            return TCPStore(host_name="127.0.0.1", port=port, world_size=world_size,
                            is_master=True, timeout=timeout, multi_tenant=True,
                            master_listen_fd=sock.detach(), use_libuv=True)

        return create_store

    return _wrap_once(rdzv, "_create_c10d_store", make, "_duet_loopback_store")
