"""GPU side of concurrent_check.py: the partition menu, the torch workloads and their timing.

Kept thin: shapes, predictions and the report live in concurrent_model.py (CPU-tested).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

import torch

from benchmark.gpu.concurrent_model import Measured, hardware_for
from benchmark.latency_model.torch_forward import TorchRunner

CYCLES_PER_MS = 2_000_000  # torch.cuda._sleep spins this many SM cycles per ms (~2 GHz)


def run_on_gpu(args, model, decode, prefill, choose_sizes):
    """(setup dict, [Measured], latency-model hardware name) for the configured check."""
    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    props = torch.cuda.get_device_properties(dev)
    hw_name, hw_note = (hardware_for(props.name) if args.hardware == "auto"
                        else (args.hardware, ""))
    menu, reason, fallback = _menu(args.backend, args.device)
    runner = TorchRunner(model, seed=args.seed, cuda_graph=False, device=f"cuda:{args.device}")
    fwd_d, fwd_p = runner.prepare(decode), runner.prepare(prefill)
    torch.cuda.synchronize()
    clock = Clock(args.warmup, args.repeats, int(args.gate_ms * CYCLES_PER_MS))
    measured: list[Measured] = []
    try:
        if fallback is None:
            sizes = choose_sizes(args, menu.decode_sizes, menu.total_sms)
            for s in sizes:
                ds, ps = menu.streams(s)
                try:
                    clock.probe(ds)
                    m = _split(clock, args.cuda_graph, fwd_d, fwd_p, ds, ps, s,
                               menu.prefill_sms(s))
                except Exception as exc:  # keep the other splits and the report
                    m = Measured(s, menu.prefill_sms(s), error=f"{type(exc).__name__}: {exc}")
                measured.append(m)
                _release(ds, ps)
                print(f"S_d={s}: {m.error or 'done'}", flush=True)
        else:
            st = torch.cuda.Stream(dev)
            clock.probe(st)
            measured.append(_sequential(clock, args.cuda_graph, fwd_d, fwd_p, st))
            _release(st)
    finally:
        if menu is not None:
            menu.close()
    setup = {
        "mode": "partitioned" if fallback is None else "sequential-whole-device",
        "timing": clock.note,
        "device": {"name": props.name, "num_sms": props.multi_processor_count,
                   "cc": [props.major, props.minor], "torch": torch.__version__,
                   "cuda": torch.version.cuda},
        "partition": {"backend": getattr(menu, "backend", None), "reason": reason,
                      "menu": list(getattr(menu, "decode_sizes", ())),
                      "fallback_reason": fallback},
        "notes": [n for n in (hw_note, runner.sdpa_note) if n],
    }
    return setup, measured, hw_name


def _menu(backend: str, device: int):
    """(menu or None, backend reason, why there is no split or None)."""
    try:
        from sglang_duet.partition import build_partition_menu

        menu, reason = build_partition_menu(backend, device)
    except Exception as exc:  # kernel library missing or broken: whole device only
        why = f"building the partition menu failed: {type(exc).__name__}: {exc}"
        return None, why, why
    if menu.backend == "none" or not len(menu):
        return menu, reason, f"no partitions ({reason}); timed sequentially on the whole device"
    return menu, reason, None


def _release(*streams) -> None:
    """Waits for `streams`, drops graphs and cached blocks tied to them."""
    for s in streams:
        s.synchronize()
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def _step(fwd: Callable, stream, use_graph: bool, warmup: int) -> tuple[Callable, str]:
    """A no-argument call that runs `fwd` on `stream`: a CUDA graph captured on that very
    stream (so its kernels keep to the partition), or eager if capture fails."""
    with torch.cuda.stream(stream):
        for _ in range(max(1, warmup)):
            fwd()
    stream.synchronize()
    how = "eager"
    run = fwd
    if use_graph:
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
                fwd()
            stream.synchronize()
            run, how = graph.replay, "graph"
        except Exception as exc:
            how = f"eager (graph capture failed: {type(exc).__name__}: {exc})"

    def on_stream() -> None:
        with torch.cuda.stream(stream):
            run()

    return on_stream, how


def _split(clock, use_graph, fwd_d, fwd_p, ds, ps, sms_d: int, sms_p: int) -> Measured:
    run_d, how_d = _step(fwd_d, ds, use_graph, clock.warmup)
    run_p, how_p = _step(fwd_p, ps, use_graph, clock.warmup)
    m = Measured(sms_d, sms_p, notes=[f"decode: {how_d}", f"prefill: {how_p}"])
    m.decode_alone = clock.alone(run_d, ds)
    m.prefill_alone = clock.alone(run_p, ps)
    m.decode_concurrent, m.prefill_concurrent, m.start_skew = clock.pair(run_d, ds, run_p, ps)
    return m


def _sequential(clock, use_graph, fwd_d, fwd_p, stream) -> Measured:
    run_d, how_d = _step(fwd_d, stream, use_graph, clock.warmup)
    run_p, how_p = _step(fwd_p, stream, use_graph, clock.warmup)
    m = Measured(None, None, notes=[f"decode: {how_d}", f"prefill: {how_p}",
                                    "sequential on the whole device: no concurrent timing"])
    m.decode_alone = clock.alone(run_d, stream)
    m.prefill_alone = clock.alone(run_p, stream)
    return m


class Clock:
    """CUDA events on each stream; host clock (stream queries) where events fail there."""

    def __init__(self, warmup: int, repeats: int, gate_cycles: int) -> None:
        self.warmup, self.repeats, self.gate_cycles = warmup, repeats, gate_cycles
        self.events = True
        self.note = "cuda events per stream"

    def probe(self, stream) -> None:
        if not self.events:
            return
        try:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(stream)
            b.record(stream)
            b.synchronize()
            a.elapsed_time(b)
        except RuntimeError as exc:
            self.events = False
            self.note = f"host clock: CUDA events failed on a partition stream ({exc})"

    def alone(self, run: Callable, stream) -> list[float]:
        out = []
        for i in range(self.warmup + self.repeats):
            stream.synchronize()
            if self.events:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(stream)
                run()
                b.record(stream)
                b.synchronize()
                dt = a.elapsed_time(b) / 1e3
            else:
                t0 = time.perf_counter()
                run()
                stream.synchronize()
                dt = time.perf_counter() - t0
            if i >= self.warmup:
                out.append(dt)
        return out

    def pair(self, run_d: Callable, ds, run_p: Callable, ps):
        """Decode launched first on `ds`, prefill on `ps`: (decode s, prefill s, skew s)."""
        td, tp, skew = [], [], []
        for i in range(self.warmup + self.repeats):
            ds.synchronize()
            ps.synchronize()
            d, p, k = self._pair_events(run_d, ds, run_p, ps) if self.events else \
                self._pair_host(run_d, ds, run_p, ps)
            if i >= self.warmup:
                td.append(d)
                tp.append(p)
                if k is not None:
                    skew.append(k)
        return td, tp, skew

    def _pair_events(self, run_d, ds, run_p, ps):
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        gate = torch.cuda.Event()
        if self.gate_cycles > 0:  # hold both streams until both workloads are enqueued
            with torch.cuda.stream(ds):
                torch.cuda._sleep(self.gate_cycles)
        gate.record(ds)
        ps.wait_event(gate)
        ev[0].record(ds)
        run_d()
        ev[1].record(ds)
        ev[2].record(ps)
        run_p()
        ev[3].record(ps)
        ev[1].synchronize()
        ev[3].synchronize()
        try:
            skew = ev[0].elapsed_time(ev[2]) / 1e3
        except RuntimeError:
            skew = None
        return ev[0].elapsed_time(ev[1]) / 1e3, ev[2].elapsed_time(ev[3]) / 1e3, skew

    @staticmethod
    def _pair_host(run_d, ds, run_p, ps):
        t0 = time.perf_counter()
        run_d()
        run_p()
        d = p = None
        while d is None or p is None:
            now = time.perf_counter()
            if d is None and ds.query():
                d = now - t0
            if p is None and ps.query():
                p = now - t0
        return d, p, None
