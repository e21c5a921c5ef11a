"""Published measurements as calibration samples (sglang_duet.calibrate.published)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglang_duet.calibrate.published import chunk_chain, read_published, usable

CSV = Path(__file__).resolve().parents[2] / "benchmark/latency_model/published/reference.csv"
HEAD = ("id,model,gpu,precision,tp,phase,prefill_tokens,decode_batch,context_tokens,metric,"
        "iteration_ms,end_to_end,conversion,notes,source\n")
ROW = "r1,llama-3-8b,h100-sxm,bf16,1,decode,,8,1024,median TPOT,7.5,yes,,,{src}\n"


def _csv(tmp_path, *rows):
    path = tmp_path / "p.csv"
    path.write_text(HEAD + "".join(rows))
    return path


def test_a_row_without_a_source_is_rejected(tmp_path):
    with pytest.raises(ValueError, match=r":3: row r1 has no source"):
        read_published(_csv(tmp_path, ROW.format(src="https://x"), ROW.format(src=" ")))


@pytest.mark.parametrize("bad,match", [
    (ROW.format(src="s").replace("decode", "verify"), "phase"),
    (ROW.format(src="s").replace(",8,", ",,"), "batch shape"),
    (ROW.format(src="s").replace("7.5", "-1"), "> 0"),
])
def test_bad_rows_name_the_line(tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        read_published(_csv(tmp_path, bad))


def test_row_to_sample(tmp_path):
    (row,) = read_published(_csv(tmp_path, ROW.format(src="s")))
    s = row.sample()
    assert row.excluded() is None and s.hardware == "h100-sxm" and s.seconds == 0.0075
    assert s.model.name == "llama-3.1-8b"  # the same shape
    assert s.batch.pairs() == [(1, 1024)] * 8 and s.cpu_share == 1.0


def test_exclusions_and_cpu_share(tmp_path):
    rows = read_published(_csv(
        tmp_path,
        ROW.format(src="s").replace("r1,", "fp8,").replace("bf16", "fp8"),
        ROW.format(src="s").replace("r1,", "ttft,").replace("median TPOT", "median TTFT"),
        ROW.format(src="s").replace("r1,", "bound,").replace(",,,s", ",,INEQUALITY: > 7,s"),
        ROW.format(src="s").replace("r1,", "chunk,").replace(",yes,,", ",yes,x / 10 tokens "
                                                              "per chunk,"),
        ROW.format(src="s").replace("r1,", "engine,").replace(",yes,", ",no,"),
    ))
    why = {r.id: r.excluded() for r in rows}
    assert why["fp8"].startswith("fp8") and "first token" in why["ttft"]
    assert "bound" in why["bound"] and why["chunk"] is None
    share = {r.id: r.cpu_share() for r in rows}
    assert share["chunk"] == pytest.approx(0.1) and share["engine"] == 0.0
    assert [r.id for r in usable(rows)] == ["chunk", "engine"]


def test_committed_reference_set_loads():
    rows = read_published(CSV)
    assert len(rows) >= 30 and all(r.source.strip() for r in rows)
    assert len(usable(rows, ("h100-sxm", "h200"))) >= 10


def test_chunk_chain():
    chain = chunk_chain(20000, 8192)
    assert [b.pairs() for b in chain] == [[(8192, 0)], [(8192, 8192)], [(3616, 16384)]]
