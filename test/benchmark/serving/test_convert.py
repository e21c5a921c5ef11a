"""Trace converter: exact token counts for the tiny tokenizer, shared prefixes, arrivals."""

from __future__ import annotations

import pytest

from benchmark.serving import convert as cv
from benchmark.serving.traces import TraceRequest, load_trace


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    from sglang_duet.tiny_model import default_model_path

    return AutoTokenizer.from_pretrained(str(default_model_path()))


@pytest.fixture(scope="module")
def builder(tok):
    return cv.PromptBuilder(tok, seed=0)


def test_traces_load_with_documented_counts():
    assert len(load_trace("azure_code")) == 8819
    assert len(load_trace("azure_conv")) == 19366
    moon = load_trace("mooncake")
    assert len(moon) == 12031
    assert moon[0].arrival_s == 0.0 and moon[0].hash_ids[:2] == (0, 1)


@pytest.mark.parametrize("n", [1, 2, 3, 17, 128, 1000, 4000])
def test_prompt_has_exactly_n_tokens(tok, builder, n):
    text = builder.text(builder.ids_for(n, key=n))
    assert len(tok.encode(text)) == n


@pytest.mark.parametrize("trace,scale", [("azure_code", 0.1), ("azure_conv", 0.25),
                                         ("mooncake", 0.02)])
def test_converted_requests_have_the_trace_lengths(tok, builder, trace, scale):
    reqs = cv.sample(load_trace(trace), 25, "uniform", seed=3)
    rows, info = cv.convert(reqs, tok, scale, max_len=4096, builder=builder)
    assert info["requests"] == len(rows) == 25
    for r, t in zip(rows, reqs, strict=True):
        assert len(tok.encode(r.prompt)) == r.prompt_len
        want_in, want_out, _ = cv.scale_lengths(t, scale, 4096)
        if t.hash_ids:
            want_in = min(want_in, len(t.hash_ids) * info["mooncake_block_tokens"])
        assert (r.prompt_len, r.output_len) == (want_in, want_out)
        assert r.prompt_len + r.output_len <= 4096


def test_mooncake_shared_hash_ids_give_shared_prefixes(tok, builder):
    a = TraceRequest(0.0, 1500, 10, (7, 8, 9))
    b = TraceRequest(0.0, 1200, 10, (7, 8, 11))
    c = TraceRequest(0.0, 1200, 10, (5, 8, 9))
    rows, info = cv.convert([a, b, c], tok, scale=0.1, builder=builder)
    block = info["mooncake_block_tokens"]
    ids = [tok.encode(r.prompt) for r in rows]
    assert ids[0][: 2 * block] == ids[1][: 2 * block]
    assert ids[0][2 * block: 3 * block] != ids[1][2 * block: 3 * block]
    assert ids[0][:block] != ids[2][:block]


def test_sampling_is_seeded_and_in_trace_order():
    reqs = load_trace("azure_conv")
    s1, s2 = cv.sample(reqs, 50, "uniform", 1), cv.sample(reqs, 50, "uniform", 1)
    assert s1 == s2 and s1 != cv.sample(reqs, 50, "uniform", 2)
    assert [r.arrival_s for r in s1] == sorted(r.arrival_s for r in s1)
    assert cv.sample(reqs, 5, "first") == reqs[:5]


def test_trace_arrivals_rescaled_to_qps():
    reqs = [TraceRequest(t, 10, 10) for t in (0.0, 1.0, 1.5, 9.0)]
    ms = cv.trace_arrivals_ms(reqs, qps=3.0)
    assert ms[0] == 0.0
    assert ms[-1] == pytest.approx(1000.0 * 3 / 3.0)  # 3 gaps at 3 req/s
    assert ms[1] / ms[2] == pytest.approx(1.0 / 1.5)


def test_scale_clips_to_context():
    inp, out, cut = cv.scale_lengths(TraceRequest(0.0, 100_000, 500), 0.1, 4096)
    assert cut and inp + out <= 4096 and out == 50
    assert cv.scale_lengths(TraceRequest(0.0, 30, 6), 0.1, 4096) == (3, 2, False)
