"""Trace loaders and the sampling rule."""

from __future__ import annotations

import gzip
import hashlib
import lzma
import os

import numpy as np
import pytest

from sglang_duet.sim.arrivals import build_arrivals
from sglang_duet.sim.traces import TRACES, TraceError, load_trace, trace_dir

# benchmark/traces/README.md's git blob ids of the upstream files: the .xz files must
# decompress to exactly those bytes.
UPSTREAM_BLOBS = {
    "azure-code": "62bd8109d0f2b1bc48206d397ecca48d8de03aab",
    "azure-conv": "5b9219f2caf93bbbf95ec29894e206115658e235",
    "mooncake": "5a371794b81d7fc7487ec8a02a2c631bcc7fbdf8",
}


class TestBundledTraces:
    @pytest.mark.parametrize(
        "name, n, mean_in, mean_out",
        [("azure-code", 8819, 2047.8, 27.9), ("azure-conv", 19366, 1154.7, 211.1),
         ("mooncake", 12031, 12035.1, 342.6)],
    )
    def test_counts_and_means(self, name, n, mean_in, mean_out):
        # The paper swaps the Azure counts (code 19,366 / conv 8,819); the files do not.
        t = load_trace(name)
        assert len(t) == n
        assert t.input_len.mean() == pytest.approx(mean_in, abs=0.05)
        assert t.output_len.mean() == pytest.approx(mean_out, abs=0.05)
        assert t.arrival_s[0] == 0.0
        assert np.all(np.diff(t.arrival_s) >= 0)

    @pytest.mark.parametrize("name", sorted(UPSTREAM_BLOBS))
    def test_compressed_file_holds_the_upstream_bytes(self, name):
        with lzma.open(os.path.join(trace_dir(), TRACES[name][0])) as f:
            data = f.read()
        blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git hash-object
        assert blob == UPSTREAM_BLOBS[name]

    def test_mooncake_buckets_are_spread(self):
        t = load_trace("mooncake")
        # 3 s buckets of many requests become distinct, ordered arrivals within the bucket
        assert np.unique(t.arrival_s).size > 10 * 1180
        assert t.arrival_s[-1] == pytest.approx(3537.0 + 3.0, abs=3.0)


class TestPaths:
    def test_csv_path(self, tmp_path):
        p = tmp_path / "t.csv"
        p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:00:01.5000000,10,3\n2023-11-16 18:00:00.2500000,20,4\n")
        t = load_trace(str(p))
        assert t.input_len.tolist() == [20, 10]  # sorted by arrival
        assert t.arrival_s.tolist() == pytest.approx([0.0, 1.25])

    def test_jsonl_path(self, tmp_path):
        p = tmp_path / "t.jsonl"
        p.write_text('{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": [0]}\n'
                     '{"timestamp": 0, "input_length": 6, "output_length": 1, "hash_ids": [1]}\n'
                     '{"timestamp": 3000, "input_length": 7, "output_length": 1, "hash_ids": []}\n')
        t = load_trace(str(p))
        assert t.arrival_s.tolist() == pytest.approx([0.0, 1.5, 3.0])

    @pytest.mark.parametrize("suffix", [".xz", ".gz"])
    def test_compressed_paths_read_like_plain_ones(self, tmp_path, suffix):
        text = ('{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": [0]}\n'
                '{"timestamp": 3000, "input_length": 7, "output_length": 1, "hash_ids": []}\n')
        plain = tmp_path / "t.jsonl"
        plain.write_text(text)
        packed = tmp_path / ("t.jsonl" + suffix)
        with (lzma.open if suffix == ".xz" else gzip.open)(packed, "wt") as f:
            f.write(text)
        a, b = load_trace(str(plain)), load_trace(str(packed))
        assert b.name == "t.jsonl" and a.arrival_s.tolist() == b.arrival_s.tolist()
        assert a.input_len.tolist() == b.input_len.tolist() == [5, 7]

    def test_corrupt_compressed_file(self, tmp_path):
        p = tmp_path / "t.csv.xz"
        p.write_bytes(b"not xz at all")
        with pytest.raises(TraceError):
            load_trace(str(p))

    @pytest.mark.parametrize("content", ["a,b,c\n1,2,3\n", "TIMESTAMP,ContextTokens,"
                                         "GeneratedTokens\nnot-a-time,1,1\n"])
    def test_malformed(self, tmp_path, content):
        p = tmp_path / "bad.csv"
        p.write_text(content)
        with pytest.raises(TraceError):
            load_trace(str(p))

    def test_missing(self):
        with pytest.raises(TraceError):
            load_trace("/definitely/not/here.csv")


class TestSampling:
    def test_own_timestamps_take_the_first_n(self):
        t = load_trace("azure-code")
        w = build_arrivals(t, None, 100)
        assert w.input_len.tolist() == t.input_len[:100].tolist()
        assert w.arrival_s.tolist() == t.arrival_s[:100].tolist()

    def test_qps_samples_uniformly_and_is_seeded(self):
        t = load_trace("mooncake")
        a = build_arrivals(t, 5.0, 1000, seed=0)
        b = build_arrivals(t, 5.0, 1000, seed=0)
        c = build_arrivals(t, 5.0, 1000, seed=1)
        assert np.array_equal(a.input_len, b.input_len)
        assert np.array_equal(a.arrival_s, b.arrival_s)
        assert not np.array_equal(a.input_len, c.input_len)
        # the documented rule: default_rng(seed).choice without replacement, in draw order
        idx = np.random.default_rng(0).choice(len(t), 1000, replace=False)
        assert np.array_equal(a.input_len, t.input_len[idx])
        assert a.input_len.mean() == pytest.approx(10344, abs=1)  # traces README's table
        assert a.arrival_s[0] == 0.0
        assert 1000 / a.arrival_s[-1] == pytest.approx(5.0, rel=0.1)

    def test_too_many(self):
        with pytest.raises(ValueError):
            build_arrivals(load_trace("azure-code"), None, 10**6)

    def test_more_than_the_trace_at_a_qps_draws_with_replacement(self):
        t = load_trace("azure-code")
        w = build_arrivals(t, 50.0, 2 * len(t), seed=0)
        assert len(w) == 2 * len(t) and "with replacement" in w.description
        assert set(w.input_len.tolist()) <= set(t.input_len.tolist())
