"""The GPU profiler's CPU-testable parts: grid, aggregation, CSV output, and the torch forward
on tiny CPU shapes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmark.latency_model import profile_gpu as pg
from sglang_duet.calibrate.fit import calibrate
from sglang_duet.calibrate.samples import read_samples
from sglang_duet.latency import Batch, ModelSpec, get_model

TINY = ModelSpec("tiny", num_layers=2, hidden=64, num_heads=4, num_kv_heads=2, head_dim=16,
                 intermediate=128, vocab=100, qk_norm=True)


def test_grid_respects_kv_budget():
    m = get_model("qwen3-8b")
    full = pg.build_grid(m, 1e15)
    small = pg.build_grid(m, 10e9)
    assert len(small) < len(full)
    assert all(b.kv_sum * m.kv_bytes_per_token <= 10e9 for b in small)
    assert any(b.n_decode == b.n for b in full) and any(b.n_decode == 0 for b in full)
    assert any(0 < b.n_decode < b.n for b in full)


def test_aggregate_is_median():
    assert pg.aggregate([0.3, 0.1, 0.2, 5.0, 0.25]) == 0.25
    with pytest.raises(ValueError):
        pg.aggregate([])


def test_partition_sizes():
    assert pg.partition_sizes("auto", 132, 2) == [None, 32, 66, 98]
    assert pg.partition_sizes("33,200,0", 132, 2) == [None, 32]
    assert pg.partition_sizes("none", 132, 2) == [None]


def test_run_grid_stops_at_budget():
    ticks = iter(range(100))
    grid = [Batch.prefill(q) for q in (16, 32, 64, 128)]
    out = list(pg.run_grid("h200", "qwen3-8b", get_model("qwen3-8b"), grid, [None, 66],
                           lambda b, s: [1.0], budget_s=2.5, clock=lambda: next(ticks)))
    assert len(out) == 2  # clock reads 0 at the start, then 1 and 2 measure, 3 > 2.5 stops


def test_dry_run_writes_calibratable_csv(tmp_path):
    out = tmp_path / "samples.csv"
    assert pg.main(["--dry-run", "--out", str(out), "--sms", "66"]) == 0
    samples = read_samples(out)
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["rows"] == len(samples) > 20 and meta["partitions"] == [None, 66]
    assert {"commit", "date", "machine", "command"} == set(meta["stamp"])  # stamp.write_result
    assert {s.sms for s in samples} == {None, 66}
    result = calibrate(samples)
    assert result.heldout_mape < 0.02  # fake timings are the model's own +-1%


def test_detect_hardware():
    assert pg.detect_hardware("NVIDIA H200") == "h200"
    assert pg.detect_hardware("NVIDIA H100 80GB HBM3") == "h100-sxm"
    with pytest.raises(SystemExit):
        pg.detect_hardware("Tesla T4")


@pytest.fixture(scope="module")
def runner():
    torch = pytest.importorskip("torch")
    from benchmark.latency_model.torch_forward import TorchRunner

    return TorchRunner(TINY, device="cpu", dtype=torch.float32, max_position=4096)


class TestTorchForwardOnCpu:
    @pytest.mark.parametrize("spec", [[(8, 0)], [(4, 12)], [(1, 30)] * 3,
                                      [(1, 5), (1, 5), (6, 3), (1, 9)]])
    def test_forward_shapes(self, runner, spec):
        logits = runner.prepare(Batch.from_pairs(spec))()
        assert tuple(logits.shape) == (len(spec), TINY.vocab)
        assert np.isfinite(logits.numpy()).all()

    def test_measure_returns_repeats(self, runner):
        times = runner.measurer(warmup=1, repeats=3)(Batch.decode(2, 7), None)
        assert len(times) == 3 and all(t > 0 for t in times)

    def test_partitions_on_cpu(self, runner):
        assert runner.partitions([None, 32])[0] == [None]

    def test_chunk_reads_cached_prefix(self, runner):
        # a chunk after 5 cached tokens attends to those cache slots
        import torch

        batch = Batch.from_pairs([(3, 5)])
        fwd = runner.prepare(batch)
        base = fwd().clone()
        assert torch.equal(fwd(), base)  # deterministic while the cache is unchanged
        for layer in fwd.caches:
            for k, _v in layer:
                k[:, :, :5] = torch.randn_like(k[:, :, :5])
        assert not torch.allclose(fwd(), base)


def test_chunk_mask_is_lower_right():
    torch = pytest.importorskip("torch")
    from benchmark.latency_model.torch_forward import _mask

    q, kv = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 8, 8)
    i, j = torch.arange(3)[:, None], torch.arange(8)[None, :]
    expect = torch.nn.functional.scaled_dot_product_attention(q, kv, kv, attn_mask=j <= i + 5)
    got = torch.nn.functional.scaled_dot_product_attention(q, kv, kv, attn_mask=_mask(3, 8, q))
    top_left = torch.nn.functional.scaled_dot_product_attention(q, kv, kv, is_causal=True)
    assert torch.allclose(got, expect, atol=1e-5)
    assert not torch.allclose(top_left, expect, atol=1e-3)


def test_decode_graph_captured_on_the_partition_stream(monkeypatch):
    """The graph a partition's timing replays is captured on that partition's stream: a graph
    captured on a primary-context stream would replay on every SM (CPU fakes of torch.cuda)."""
    import contextlib

    import torch

    from benchmark.latency_model import torch_forward

    seen: dict[str, object] = {}

    class FakeStream:
        def wait_stream(self, other):
            seen.setdefault("waited", other)

    class FakeGraph:
        def replay(self):
            return "replayed"

    @contextlib.contextmanager
    def fake_graph(graph, stream=None, **_kw):
        seen["capture_stream"] = stream
        yield

    current = FakeStream()
    monkeypatch.setattr(torch.cuda, "Stream", FakeStream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: current)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", fake_graph)
    part = FakeStream()
    run = torch_forward.graphed(lambda: None, part)
    assert seen["capture_stream"] is part and run() == "replayed"
    torch_forward.graphed(lambda: None, None)
    assert isinstance(seen["capture_stream"], FakeStream) and seen["capture_stream"] is not part
