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
