from __future__ import annotations

import math

import numpy as np
import pytest

from sglang_duet.latency import Batch, Breakdown

MIXED = [(1, 4096), (1, 300), (2048, 0), (512, 10000), (1, 70000)]


class TestBasics:
    def test_empty_batch_is_zero(self, make_lm):
        lm = make_lm()
        for empty in ([], Batch.from_pairs([]), [(0, 500)]):
            assert lm.predict(empty) == Breakdown(0, 0, 0, 0, 0, 0, 0)

    def test_pairs_and_batch_agree(self, make_lm):
        lm = make_lm()
        assert lm.predict(MIXED) == lm.predict(Batch.from_pairs(MIXED))

    def test_total_is_sum_of_parts(self, make_lm):
        b = make_lm(tp=2).predict(MIXED)
        assert b.comm_s > 0
        assert b.host_s > 0
        assert b.total_s == pytest.approx(b.token_ops_s + b.attention_s + b.comm_s + b.lm_head_s
                                          + b.host_s)

    def test_mixed_attention_is_sum_of_kernels(self, make_lm):
        lm = make_lm()
        dec = [p for p in MIXED if p[0] == 1]
        pre = [p for p in MIXED if p[0] > 1]
        assert lm.predict(MIXED).attention_s == pytest.approx(
            lm.predict(dec).attention_s + lm.predict(pre).attention_s)

    def test_lm_head_only_for_sampling_rows(self, make_lm):
        lm = make_lm()
        q, c = np.array([4096, 4096]), np.array([0, 0])
        both = lm.predict(Batch(q, c))
        one = lm.predict(Batch(q, c, sample=np.array([False, True])))
        none = lm.predict(Batch(q, c, sample=np.array([False, False])))
        assert none.lm_head_s == 0 < one.lm_head_s < both.lm_head_s
        assert one.token_ops_s == both.token_ops_s

    def test_flops_of_8k_prefill(self, make_lm):
        b = make_lm().predict([(8192, 0)])
        # 36 layers x (2 x 8192 x 192.9M params + norms/rope/act + causal attention) + LM head row
        linear = 36 * 2 * 8192 * (4096 * 6144 + 4096 * 4096 + 3 * 4096 * 12288)
        attention = 36 * 4 * 32 * 128 * 8192 * 8193 / 2
        assert linear + attention < b.flops < 1.01 * (linear + attention)

    def test_decode_is_memory_bound_and_reads_weights(self, make_lm):
        lm = make_lm()
        b = lm.predict(Batch.decode(8, 1024))
        assert b.bytes > lm.model.weight_bytes - 151936 * 4096 * 2  # all but the embedding
        assert b.total_s > b.bytes / lm.hardware.hbm_bw  # never faster than peak bandwidth

    def test_explain_rows_sum_to_total(self, make_lm):
        lm = make_lm(tp=2)
        rows = lm.explain(MIXED, sms=64)
        assert sum(r["seconds"] for r in rows) == pytest.approx(lm.predict(MIXED, 64).total_s)


class TestMonotonic:
    """More tokens, more context, fewer SMs: never faster."""

    @pytest.mark.parametrize("c", [0, 1000, 50000])
    def test_more_tokens(self, c, make_lm):
        lm = make_lm()
        times = [lm.predict([(q, c), (1, 2000)]).total_s for q in (1, 2, 3, 16, 512, 4096, 9000)]
        assert times == sorted(times)

    @pytest.mark.parametrize("q", [1, 2, 4096])
    def test_more_context(self, q, make_lm):
        lm = make_lm()
        times = [lm.predict([(q, c)] * 4).total_s for c in (0, 1, 100, 4096, 65536, 131072)]
        assert times == sorted(times)

    @pytest.mark.parametrize("batch", [[(8192, 0)], [(1, 32768)] * 8, MIXED])
    def test_fewer_sms(self, batch, make_lm):
        lm = make_lm()
        times = [lm.predict(batch, sms).total_s for sms in range(132, 0, -1)]
        assert times == sorted(times)
        assert times[-1] > times[0]


class TestTensorParallel:
    def test_tp2_halves_linear_work_and_adds_allreduce(self, make_lm):
        one, two = make_lm(tp=1), make_lm(tp=2)
        batch = [(4096, 0)]
        r1 = {r["name"]: r for r in one.explain(batch)}
        r2 = {r["name"]: r for r in two.explain(batch)}
        for name in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj", "attn_prefill"):
            assert r2[name]["flops"] == r1[name]["flops"] / 2
        assert r2["allreduce"]["count"] == 2 * 36
        b1, b2 = one.predict(batch), two.predict(batch)
        assert b1.comm_s == 0
        # ring: each GPU sends 2 (p-1)/p of the [T, hidden] bf16 tensor, 2x per layer
        ring = 2 * 36 * (4096 * 4096 * 2 / (450e9 * 0.8) + 10e-6)
        assert b2.comm_s == pytest.approx(ring)
        assert b2.token_ops_s < 0.55 * b1.token_ops_s


def test_breakdown_is_frozen(make_lm):
    b = make_lm().predict([(10, 0)])
    with pytest.raises(AttributeError):
        b.total_s = 0.0  # type: ignore[misc]
    assert math.isfinite(b.total_s)


class TestBatch:
    def test_validation(self):
        with pytest.raises(ValueError, match="pairs"):
            Batch.from_pairs([(1, 2, 3)])
        with pytest.raises(ValueError, match=">= 0"):
            Batch(np.array([1]), np.array([-1]))
        with pytest.raises(ValueError, match="length"):
            Batch(np.array([1, 2]), np.array([0]))
        with pytest.raises(ValueError, match="sample"):
            Batch(np.array([1]), np.array([0]), sample=np.array([True, False]))

    def test_derived_sums(self):
        b = Batch.from_pairs([(1, 10), (4, 2), (0, 99)])
        assert (b.n, b.tokens, b.n_decode, b.n_sample) == (3, 5, 1, 2)
        assert b.attended_sum == 11 + (4 * 2 + 10)  # decode sees 11 keys; chunk 3+4+5+6
        assert b.kv_sum == 11 + 6  # the q=0 row reads nothing
        assert b.concat(Batch.decode(2, 5)).pairs() == b.pairs() + [(1, 5), (1, 5)]
