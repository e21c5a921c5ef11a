"""SLO-sized mixed batches: the sized batch meets its bound, nearly fills it, and the cheap rate
bound that skips sizing never skips a batch that would have prefilled faster."""

from __future__ import annotations

import numpy as np
import pytest

from sglang_duet.latency import Batch
from sglang_duet.policy import PrefillChunk
from sglang_duet.policy.batching import truncate_chunks
from sglang_duet.policy.sized import LazySized, rate, size_aggregated


def _case(rng):
    n_d = int(rng.integers(1, 200))
    dec = Batch.decode_steps(rng.integers(100, 20000, n_d).tolist(), offset=-1)
    chunks, completes = [], []
    for i in range(int(rng.integers(1, 6))):
        start = int(rng.choice([0, 0, rng.integers(0, 30000)]))
        chunks.append(PrefillChunk(f"w{i}", start, int(rng.integers(50, 6000))))
        completes.append(bool(rng.integers(0, 2)))
    return dec, tuple(chunks), tuple(completes)


def _mixed_s(lat, dec, chunks, completes, prefix):
    flags = [completes[j] and prefix[j] == chunks[j] for j in range(len(prefix))]
    pb = Batch([c.length for c in prefix], [c.start for c in prefix], flags)
    return lat.predict_union(dec, pb).total_s


def _largest(lat, dec, chunks, completes, bound):
    """The largest fitting prefix by bisection (the reference)."""
    lo, hi = 0, sum(c.length for c in chunks)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _mixed_s(lat, dec, chunks, completes, truncate_chunks(chunks, mid)) <= bound:
            lo = mid
        else:
            hi = mid - 1
    return lo


@pytest.mark.parametrize("seed", range(40))
def test_sized_meets_the_bound_and_nearly_fills_it(make_lm, seed):
    lat = make_lm()
    rng = np.random.default_rng(seed)
    dec, chunks, completes = _case(rng)
    t_none = lat.predict(dec).total_s
    t_all = _mixed_s(lat, dec, chunks, completes, chunks)
    bound = float(rng.uniform(t_none * 0.8, t_all * 1.05))
    if t_all <= bound:
        return  # the caller takes the whole batch; not sized
    got = size_aggregated(lat, dec, chunks, completes, bound, 1.0, t_none, t_all)
    best = _largest(lat, dec, chunks, completes, bound)
    if got is None:  # nothing fits, or too little to find within its few predictions
        assert t_none >= bound or best < 256
        return
    assert got.time_s <= bound
    assert got.time_s == pytest.approx(_mixed_s(lat, dec, chunks, completes, got.chunks))
    assert got.tokens == sum(c.length for c in got.chunks) <= best
    assert got.tokens >= 0.75 * best - 64


@pytest.mark.parametrize("seed", range(40))
def test_a_probe_inside_the_first_chunk_is_the_general_probe(make_lm, seed):
    """`size_aggregated` predicts a size inside the first chunk as one bare row; its time is
    the general probe's (the truncated prefix's rows) bit for bit, so the shortcut never moves
    a plan."""
    from sglang_duet.policy.batching import chunk_rows

    lat = make_lm()
    rng = np.random.default_rng(200 + seed)
    dec, chunks, completes = _case(rng)
    t_none = lat.predict(dec).total_s
    t_all = _mixed_s(lat, dec, chunks, completes, chunks)
    bound = float(rng.uniform(t_none, t_all))
    got = size_aggregated(lat, dec, chunks, completes, bound, 1.0, t_none, t_all)
    if got is None:
        return
    assert got.chunks == truncate_chunks(chunks, got.tokens)
    assert got.time_s == lat.total_with_rows(dec, *chunk_rows(got.chunks, chunks, completes))
    for size in {1, 2, chunks[0].length - 1, chunks[0].length // 2}:
        if 1 < size < chunks[0].length:
            general = lat.total_with_rows(dec, *chunk_rows(truncate_chunks(chunks, size),
                                                           chunks, completes))
            assert lat.total_with_rows(dec, [size], [chunks[0].start], 0) == general


@pytest.mark.parametrize("seed", range(40))
def test_the_skip_bound_is_a_bound(make_lm, seed):
    lat = make_lm()
    rng = np.random.default_rng(100 + seed)
    dec, chunks, completes = _case(rng)
    t_all = _mixed_s(lat, dec, chunks, completes, chunks)
    bound = float(rng.uniform(0.02, 0.4))
    if t_all <= bound:
        return
    lazy = LazySized(lat, (132,), dec, chunks, completes, bound, 1.0, t_all)
    truth = lazy.get(0.0)
    if truth is None:
        return
    r = rate(truth.tokens, truth.time_s)
    assert lazy.get(r * 0.999) is not None  # a rate it reaches is never skipped



def _cpu_lm():
    """The runtime's CPU profile with the embedded tiny model: there a prefill row costs a step
    over a decode's time, so the first regula-falsi guess overshoots."""
    from sglang_duet.latency import LatencyModel, ModelSpec
    from sglang_duet.runtime.components import CPU_PROFILE
    from sglang_duet.tiny_model import SIZES

    tiny = ModelSpec.from_hf_config(dict(SIZES["tiny"], model_type="qwen3"), tp=1)
    return LatencyModel(CPU_PROFILE, tiny, None)


@pytest.mark.parametrize("where", ["h100", "cpu"])
@pytest.mark.parametrize("seed", range(10))
def test_prompts_under_one_align_step_are_sized_too(make_lm, where, seed):
    """A waiting chunk shorter than ALIGN (a short prompt, or the budget left after many
    decodes) still gets a fitting prefix when one of at least a quarter of it exists: the search
    bisects inside one ALIGN step instead of stopping there."""
    from sglang_duet.policy.sized import ALIGN

    lat = make_lm() if where == "h100" else _cpu_lm()
    rng = np.random.default_rng(100 + seed)
    ctx = rng.integers(20, 20000 if where == "h100" else 200, int(rng.integers(1, 8)))
    dec = Batch.decode_steps(ctx.tolist(), offset=-1)
    chunks = (PrefillChunk("w", 0, int(rng.integers(16, ALIGN))),)
    completes = (bool(rng.integers(0, 2)),)
    t_none = lat.predict(dec).total_s
    t_all = _mixed_s(lat, dec, chunks, completes, chunks)
    bound = t_none + float(rng.uniform(0.3, 0.9)) * (t_all - t_none)
    best = _largest(lat, dec, chunks, completes, bound)
    got = size_aggregated(lat, dec, chunks, completes, bound, 1.0, t_none, t_all)
    if best >= chunks[0].length // 4:
        assert got is not None and got.time_s <= bound
        assert got.tokens <= best


@pytest.mark.parametrize("where", ["8b", "14b-tp2", "cpu"])
@pytest.mark.parametrize("seed", range(25))
def test_rate_bound_exceeds_every_fitting_prefix(make_lm, where, seed):
    """`rate_bound` is at least ``P / t(P)`` for every prefix that fits the bound, whichever
    tangent point ``near`` it is given (any tangent of the convex token-operator time bounds
    it), with a correction factor, TP's all-reduce and the CPU profile's host costs."""
    from sglang_duet.policy.sized import rate_bound

    lat = {"8b": make_lm, "14b-tp2": lambda: make_lm("qwen3-14b", tp=2),
           "cpu": _cpu_lm}[where]()
    rng = np.random.default_rng(500 + seed)
    dec, chunks, completes = _case(rng)
    factor = float(rng.uniform(0.8, 1.3))
    alone = lat.predict(dec)
    n = sum(c.length for c in chunks)
    t_all = _mixed_s(lat, dec, chunks, completes, chunks) * factor
    bound = float(rng.uniform(alone.total_s * factor, t_all * 1.1))
    sizes = sorted({int(p) for p in rng.integers(1, n + 1, 60)} | {1, n})
    fits = [p / t for p in sizes
            if (t := _mixed_s(lat, dec, chunks, completes, truncate_chunks(chunks, p)) * factor)
            <= bound]
    for near in (0, int(rng.integers(1, n + 1)), n):
        ub = rate_bound(lat, alone, len(dec), chunks, n, bound, factor, near)
        assert all(r <= ub for r in fits), (near, ub, max(fits))


@pytest.mark.parametrize("lengths", [(5000,), (1, 1, 4000), (1, 300)])
@pytest.mark.parametrize("near", [0, 200, 4000])
def test_rate_bound_covers_one_token_prefixes(make_lm, lengths, near):
    """A prefix of one-token rows (P = 1, and up to the first chunk longer than a token) runs in
    the decode kernel with a decode-only pass's host time, below a mixed batch's: with the bound
    just above its time, only such a P fits, and the rate bound still covers it."""
    from sglang_duet.policy.sized import rate_bound

    lat = make_lm()
    dec = Batch.decode_steps([1000, 3000])
    chunks = tuple(PrefillChunk(f"w{i}", 0, n) for i, n in enumerate(lengths))
    completes = (True,) * len(chunks)
    n = sum(lengths)
    ones = next(i for i, c in enumerate(chunks) if c.length > 1) + 1
    t = _mixed_s(lat, dec, chunks, completes, truncate_chunks(chunks, ones))
    assert t < _mixed_s(lat, dec, chunks, completes, truncate_chunks(chunks, ones + 1))
    ub = rate_bound(lat, lat.predict(dec), len(dec), chunks, n, t, 1.0, near)
    assert ub >= ones / t


@pytest.mark.parametrize("seed", range(30))
def test_the_rate_bound_never_changes_a_plan(make_lm, seed, monkeypatch):
    """Plans over a serving-like stream (decodes advance, some finish) on the runtime's menu are
    the same with the rate bound's skip as with it off (every sized search run). The draws put
    many sized batches within a few per cent of the best split's rate, where a bound that was
    even 3% too low would change plans."""
    from sglang_duet.latency.interference import DEFAULT_INTERFERENCE
    from sglang_duet.partition.plan import plan_menu
    from sglang_duet.policy import DuetPolicy, ReqState
    from sglang_duet.policy import sized as sized_mod

    rng = np.random.default_rng(900 + seed)
    tau = float(rng.choice([0.05, 0.1, 0.2, 0.4]))
    base = int(rng.integers(500, 20000))
    decodes = [ReqState(f"d{i}", int(c), int(c), 1)
               for i, c in enumerate(rng.integers(base // 2, base * 2, int(rng.integers(1, 300))))]
    waiting = [ReqState(f"w{i}", int(p), 0, 0)
               for i, p in enumerate(rng.integers(16, 40000, int(rng.integers(1, 4))))]
    menu = plan_menu("green-ctx", "h100-sxm")

    def stream(skip: bool) -> list:
        if not skip:
            monkeypatch.setattr(sized_mod, "rate_bound", lambda *a: float("inf"))
        lat = make_lm()
        lat = type(lat)(lat.hardware, lat.model, None, DEFAULT_INTERFERENCE)
        pol = DuetPolicy("adaptive", tau, max_lookahead=16, latency=lat, menu=menu.sm_menu,
                         decode_host=menu.decode_host)
        out, ds = [], list(decodes)
        for step in range(40):
            out.append(pol.plan(ds, waiting))
            ds = [ReqState(r.rid, r.prompt_len, r.computed, r.generated + 1)
                  for j, r in enumerate(ds) if (j + step) % 37]
        monkeypatch.undo()
        return out

    assert stream(True) == stream(False)
