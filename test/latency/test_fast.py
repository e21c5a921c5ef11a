"""The fast path (latency/fast/) equals the reference (reference.py), and the vectorised menu
scoring equals the scalar prediction bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_duet.latency import Batch, Calibration
from sglang_duet.latency.contention import combine, combine_totals

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODELS = st.sampled_from([("qwen3-8b", 1), ("qwen3-8b", 2), ("qwen3-14b", 4),
                          ("llama-3.1-8b", 1)])
HARDWARE = st.sampled_from(["h100-sxm", "h200", "a100-80g"])
# prefill chunks of every size and decodes, long contexts: rows land on both sides of the
# compute/memory boundary at some SM counts
rows = st.tuples(st.one_of(st.just(1), st.just(0), st.integers(2, 40000)),
                 st.integers(0, 300000))


@st.composite
def calibrations(draw):
    if draw(st.booleans()):
        return None
    effs = draw(st.lists(st.floats(0.01, 1.0), min_size=9, max_size=9))
    over = draw(st.sampled_from([0.0, 2e-5]))
    return Calibration(**dict(zip(Calibration.efficiency_names(), effs, strict=True)),
                       iteration_overhead_s=over)


def _batch(pairs, sample=None):
    q = np.array([p[0] for p in pairs], np.int64)
    c = np.array([p[1] for p in pairs], np.int64)
    return Batch(q, c, sample)


def _alone_equal_predict(lm, dec, pre, sd, sp):
    """The menu-wide table's times alone equal scalar `predict` at every pair, bit for bit."""
    tab = lm.predict_concurrent_table(dec, pre, sd, sp)
    for i, (a, b) in enumerate(zip(sd, sp, strict=True)):
        assert tab.decode_alone_s[i] == lm.predict(dec, a, host="lookahead").total_s
        after = "lookahead" if dec.tokens else None  # launched after step 0
        assert tab.prefill_alone_s[i] == lm.predict(pre, b, host="spatial", after=after).total_s


@SETTINGS
@given(st.lists(rows, max_size=300), MODELS, HARDWARE, calibrations(), st.data())
def test_table_equals_predict_on_any_batch(make_lm, reqs, model, hw, cal, data):
    lm = make_lm(model[0], hw, model[1], cal)
    sample = data.draw(st.lists(st.booleans(), min_size=len(reqs), max_size=len(reqs)))
    b = _batch(reqs, sample if data.draw(st.booleans()) else None)
    total = lm.hardware.num_sms
    sd = tuple(data.draw(st.lists(st.integers(2, total - 2), min_size=1, max_size=70)))
    sd = tuple(s - s % 2 for s in sd)
    _alone_equal_predict(lm, b, b, sd, tuple(total - s for s in sd))


@SETTINGS
@given(st.lists(st.integers(0, 300000), max_size=300), st.lists(rows, max_size=12), MODELS,
       HARDWARE, calibrations(), st.data())
def test_concurrent_totals_equal_predict_concurrent(make_lm, ctx, pre, model, hw, cal, data):
    lm = make_lm(model[0], hw, model[1], cal)
    total = lm.hardware.num_sms
    dec = Batch.decode_steps(ctx)
    pb = _batch(pre)
    sd = data.draw(st.lists(st.integers(2, total - 2), min_size=1, max_size=70))
    sd = tuple(s - s % 2 for s in sd)
    sp = tuple(total - s for s in sd)
    tab = lm.predict_concurrent_table(dec, pb, sd, sp)
    for i, (a, b) in enumerate(zip(sd, sp, strict=True)):
        d, p = lm.predict_concurrent(dec, pb, a, b)
        assert (tab.decode_s[i], tab.prefill_s[i]) == (d.total_s, p.total_s)
    _alone_equal_predict(lm, dec, pb, sd, sp)


@SETTINGS
@given(st.lists(st.tuples(st.one_of(st.just(0.0), st.floats(1e-6, 10.0)),
                          st.one_of(st.just(0.0), st.floats(1e-6, 10.0))), min_size=1,
                max_size=70), st.floats(0.0, 1e13), st.floats(0.0, 1e13))
def test_combine_totals_equals_combine(make_lm, pairs, bytes_d, bytes_p):
    lm = make_lm()
    cap = lm.bandwidth_cap
    t_d = np.array([p[0] for p in pairs])
    t_p = np.array([p[1] for p in pairs])
    for positive in (True, False):
        if positive and not ((t_d > 0).all() and (t_p > 0).all()):
            continue
        c_d, c_p = combine_totals(cap, t_d, bytes_d, t_p, bytes_p, positive=positive)
        for i in range(len(pairs)):
            d, p = combine(cap, _bd(t_d[i], bytes_d), _bd(t_p[i], bytes_p))
            assert (c_d[i], c_p[i]) == (d.total_s, p.total_s)


def _bd(t, nbytes):
    from sglang_duet.latency import Breakdown

    return Breakdown(float(t), float(t), 0.0, 0.0, 0.0, 0.0, nbytes)


@SETTINGS
@given(st.lists(rows, max_size=200), st.lists(rows, max_size=200), MODELS,
       st.one_of(st.none(), st.integers(1, 132)))
def test_assembly_does_not_change_predictions(make_lm, a, b, model, sms):
    """Concatenated, reordered or unioned: the same rows predict the same, bit for bit."""
    lm = make_lm(model[0], "h100-sxm", model[1])
    ba, bb = _batch(a), _batch(b)
    whole = _batch(a + b)
    ref = lm.predict(whole, sms)
    assert lm.predict(ba.concat(bb), sms) == ref
    assert lm.predict_union(ba, bb, sms) == ref
    assert lm.predict(_batch(list(reversed(a + b))), sms) == ref
    assert lm.predict(Batch.from_pairs(a + b), sms) == ref


@given(st.lists(st.integers(0, 10**6), max_size=400), st.sampled_from([0, -1, 3]))
def test_decode_steps_equals_the_general_constructor(ctx, offset):
    ctx = [c + 1 for c in ctx]  # offset -1 keeps them >= 0
    fast = Batch.decode_steps(ctx, offset=offset)
    slow = Batch(np.ones(len(ctx), np.int64), np.array(ctx, np.int64) + offset)
    assert fast.pairs() == slow.pairs()
    assert fast.sample.tolist() == slow.sample.tolist()
    for attr in ("n", "tokens", "n_sample", "n_decode", "attended_sum", "kv_sum"):
        assert getattr(fast, attr) == getattr(slow, attr)
    fk, sk = fast.kernels, slow.kernels
    assert [(k.n, k.q, k.kv, k.attended) for k in fk] == [(k.n, k.q, k.kv, k.attended)
                                                          for k in sk]


def test_decode_steps_validates():
    with pytest.raises(ValueError, match=">= 0"):
        Batch.decode_steps([5, 0], offset=-1)
    assert Batch.decode_steps([]).n == 0


@SETTINGS
@given(st.lists(rows, min_size=1, max_size=50), MODELS, st.integers(2, 130), st.integers(1, 3))
def test_token_seconds_floor_bounds_every_prediction(make_lm, reqs, model, sd, k):
    lm = make_lm(model[0], "h100-sxm", model[1])
    sd -= sd % 2
    sp = 132 - sd
    b = _batch(reqs)
    floor = lm.token_seconds_floor((sp,))[0]
    dec = Batch.decode(k, 4096)
    _, p = lm.predict_concurrent(dec, b, sd, sp)
    assert p.total_s >= floor * b.tokens
    assert lm.predict(b, sp).total_s >= floor * b.tokens


def test_reduction_order_matches_the_scalar_loop():
    """numpy's outer-axis sum accumulates row by row, like predict's loop over operators."""
    rng = np.random.default_rng(0)
    for width in (1, 2, 3, 7, 8, 9, 64, 65, 130):
        m = rng.random((11, width)) * 10.0 ** rng.integers(-12, 12, (11, width))
        from sglang_duet.latency.fast import row_sum as _row_sum

        acc = np.zeros(width)
        for row in m:
            acc = acc + row
        assert np.array_equal(_row_sum(m), acc)


@SETTINGS
@given(st.floats(0.002, 0.02), st.floats(0.05, 1.0),
       st.lists(st.integers(0, 40), min_size=49, max_size=300),
       st.lists(st.tuples(st.integers(2, 3000), st.integers(0, 50)), min_size=49, max_size=120))
def test_rows_split_between_compute_and_memory(make_lm, dec_eff, pre_eff, ctx, pre):
    """Calibrations that put the compute/memory boundary inside a kernel's rows (the sorted
    split, in numpy for many rows): the vectorised path still equals the scalar one."""
    cal = Calibration(attn_decode_compute=dec_eff, attn_decode_bw=1.0,
                      attn_prefill_compute=pre_eff, attn_prefill_bw=0.6)
    lm = make_lm(calibration=cal)
    sd = tuple(range(2, 131, 2))
    for b in (Batch.decode_steps(ctx), _batch(pre), _batch(pre + [(1, c) for c in ctx])):
        _alone_equal_predict(lm, b, b, sd, tuple(132 - s for s in sd))


# --- the fast path against the reference (reference.py: each operator written once) ---------
REL = 1e-9  # the fast path sums exact integers before converting; the reference sums floats


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL * max(abs(a), abs(b), 1e-30)


@SETTINGS
@given(st.lists(rows, max_size=120), MODELS, HARDWARE, calibrations(),
       st.one_of(st.none(), st.integers(1, 132)), st.sampled_from(["scheduled", "lookahead",
                                                                   "spatial"]), st.data())
def test_fast_predict_equals_reference(make_lm, reqs, model, hw, cal, sms, host, data):
    lm = make_lm(model[0], hw, model[1], cal)
    if sms is not None:
        sms = min(sms, lm.hardware.num_sms)
    sample = data.draw(st.lists(st.booleans(), min_size=len(reqs), max_size=len(reqs)))
    b = _batch(reqs, sample if data.draw(st.booleans()) else None)
    after = data.draw(st.sampled_from([None, "lookahead", "lookahead_eager"]))  # a spatial start
    fast = lm.predict(b, sms, host=host, after=after)
    ref = lm.predict_reference(b, sms, host=host, after=after)
    for field in ("total_s", "token_ops_s", "attention_s", "comm_s", "lm_head_s", "flops",
                  "bytes", "host_s"):
        assert _close(getattr(fast, field), getattr(ref, field)), field


@SETTINGS
@given(st.lists(rows, min_size=1, max_size=60), MODELS, st.one_of(st.none(), st.integers(1, 132)))
def test_explain_rows_add_up_to_predict(make_lm, reqs, model, sms):
    cal = Calibration(iteration_overhead_s=3e-4, launch_layer_s=5e-5, graph_replay_s=2e-5)
    lm = make_lm(model[0], "h100-sxm", model[1], cal)
    b = _batch(reqs)
    total = sum(r["seconds"] for r in lm.explain(b, sms))
    assert _close(total, lm.predict(b, sms).total_s)


# --- the entry-by-entry paths for short menus and the sized search's probes -----------------
@SETTINGS
@given(st.lists(st.integers(0, 300000), max_size=300), st.lists(rows, max_size=12), MODELS,
       HARDWARE, calibrations(), st.sampled_from(["none", "published"]), st.data())
def test_concurrent_lists_equal_the_table(ctx, pre, model, hw, cal, inter, data):
    """`predict_concurrent_lists` (Python floats, entry by entry) equals the numpy table and
    the scalar `predict_concurrent`, bit for bit, empty sides included."""
    from sglang_duet.latency import LatencyModel, get_hardware, get_model

    lm = LatencyModel(get_hardware(hw), get_model(model[0], model[1]), cal, inter)
    total = lm.hardware.num_sms
    sd = data.draw(st.lists(st.integers(2, total - 2), min_size=1, max_size=24))
    sd = tuple(s - s % 2 for s in sd)
    sp = tuple(total - s for s in sd)
    dec, pb = Batch.decode_steps(ctx), _batch(pre)
    host = data.draw(st.sampled_from(["lookahead", "scheduled"]))
    got_d, got_p = lm.predict_concurrent_lists(dec, pb, sd, sp, host)
    tab = lm.predict_concurrent_table(dec, pb, sd, sp, host)
    assert (got_d, got_p) == (tab.decode_s.tolist(), tab.prefill_s.tolist())
    for i, (a, b) in enumerate(zip(sd, sp, strict=True)):
        d, p = lm.predict_concurrent(dec, pb, a, b, host)
        assert (got_d[i], got_p[i]) == (d.total_s, p.total_s)


@SETTINGS
@given(st.floats(1e-6, 10.0), st.floats(1e-6, 10.0), st.floats(0.0, 1e13), st.floats(0.0, 1e13))
def test_combine_pair_equals_combine_totals(make_lm, t_d, t_p, bytes_d, bytes_p):
    from sglang_duet.latency.contention import combine_pair

    cap = make_lm().bandwidth_cap
    c_d, c_p = combine_totals(cap, np.array([t_d]), bytes_d, np.array([t_p]), bytes_p,
                              positive=True)
    assert combine_pair(cap, t_d, bytes_d, t_p, bytes_p) == (c_d[0], c_p[0])


@given(st.lists(rows, max_size=30), st.data())
def test_few_equals_the_general_constructor(reqs, data):
    """`Batch.few` (a plan's chunks, from lists) builds the batch `Batch(q, c, sample)` does."""
    q, c = [p[0] for p in reqs], [p[1] for p in reqs]
    sample = data.draw(st.lists(st.booleans(), min_size=len(reqs), max_size=len(reqs)))
    fast, slow = Batch.few(q, c, sample), Batch(q, c, sample)
    assert fast.pairs() == slow.pairs()
    assert fast.sample.tolist() == slow.sample.tolist()
    for attr in ("n", "tokens", "n_sample", "n_decode", "attended_sum", "kv_sum"):
        assert getattr(fast, attr) == getattr(slow, attr)
    for fk, sk in zip(fast.kernels, slow.kernels, strict=True):
        assert (fk.n, fk.q, fk.kv, fk.attended, fk.c_min, fk.c_max) == (
            sk.n, sk.q, sk.kv, sk.attended, sk.c_min, sk.c_max)
        assert list(fk.q_rows) == list(sk.q_rows) and list(fk.c_rows) == list(sk.c_rows)


def test_few_validates():
    with pytest.raises(ValueError, match=">= 0"):
        Batch.few([4, -1], [0, 0], [True, True])
    with pytest.raises(ValueError, match=">= 0"):
        Batch.few([4], [-3], [True])
    with pytest.raises(ValueError, match="length"):
        Batch.few([4, 5], [0], [True, True])


@SETTINGS
@given(st.lists(st.integers(0, 300000), max_size=300), st.lists(rows, max_size=8), MODELS,
       st.data())
def test_predict_with_rows_equals_predict_union(make_lm, ctx, pre, model, data):
    """The sized search's probe equals `predict_union` with the probe's batch, bit for bit."""
    lm = make_lm(model[0], "h100-sxm", model[1])
    q, c = [p[0] for p in pre], [p[1] for p in pre]
    sample = data.draw(st.lists(st.booleans(), min_size=len(pre), max_size=len(pre)))
    dec = Batch.decode_steps(ctx)
    got = lm.predict_with_rows(dec, q, c, sum(sample))
    assert got == lm.predict_union(dec, Batch(q, c, sample))
    assert got.total_s == lm.predict_union(dec, Batch(q, c, sample)).total_s


@SETTINGS
@given(st.lists(st.integers(0, 300000), max_size=300), st.integers(1, 40000),
       st.integers(0, 300000), st.integers(0, 1), MODELS, st.booleans())
def test_total_with_rows_equals_predict_with_rows(make_lm, ctx, q, c, n_sample, model, mixed):
    """The sized search's one-row probe equals `predict_with_rows`' total bit for bit, for
    decode-only batches (its fast path: q >= 2) and any other (the general path)."""
    lm = make_lm(model[0], "h100-sxm", model[1])
    dec = Batch.decode_steps(ctx)
    if mixed:  # a batch with a prefill row of its own: not the fast path's case
        dec = dec.concat(Batch([3000], [500], [True]))
    assert lm.total_with_rows(dec, [q], [c], n_sample) == (
        lm.predict_with_rows(dec, [q], [c], n_sample).total_s)


@pytest.mark.parametrize("model", [("qwen3-8b", 1), ("qwen3-14b", 2)])
def test_growth_floor_tangent_and_key_bound_every_prediction(make_lm, model):
    """`growth_floor(n0)`: the token operators' time at n0 plus its slope times (n - n0) stays
    at or below their predicted time at every n (a tangent of a convex function), equals it at
    n0, and attention takes at least ``key`` seconds per attended key."""
    lm = make_lm(model[0], "h100-sxm", model[1])
    rng = np.random.default_rng(7)
    for n0 in (1, 64, 300, 2048, 9000):
        tok, slope, key = lm.growth_floor(n0)
        assert lm.predict(Batch.decode(n0, 100)).token_ops_s == pytest.approx(tok, rel=1e-12)
        for n in rng.integers(1, 20000, 40):
            qs, cs = rng.multinomial(int(n), [0.5, 0.5]) + 1, rng.integers(0, 9000, 2)
            b = _batch([(int(q), int(c)) for q, c in zip(qs, cs, strict=True)])
            got = lm.predict(b)
            assert got.token_ops_s >= (tok + slope * (b.tokens - n0)) * (1 - 1e-12)
            assert got.attention_s >= key * b.attended_sum * (1 - 1e-12)
