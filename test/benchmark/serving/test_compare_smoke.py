"""The comparison's CPU behaviour without a server: a system that cannot run here is reported as
skipped, with its reason, in the JSON and the table. The full CPU run (stock chunked prefill and
duet through real servers, tables and plots) is the serving step of
test/benchmark/gpu/test_serving_check.py::test_cpu_dry_run_all_steps."""

from __future__ import annotations

import json

import pytest

from benchmark.serving.compare import Config, compare
from benchmark.serving.systems import parse_systems
from sglang_duet.local_server import cuda_available


def test_pdmux_is_skipped_on_the_cpu_with_its_reason(tmp_path):
    if cuda_available():
        pytest.skip("pdmux runs where a GPU is present")
    from sglang_duet.tiny_model import default_model_path

    cfg = Config(trace="azure_conv", qps=[2.0], systems=parse_systems("sglang-pdmux"),
                 model=str(default_model_path()), num_requests=5, scale=0.05, tag="smoke",
                 out_dir=str(tmp_path / "out"), warmup_pass=False)
    lines: list[str] = []
    results = compare(cfg, progress=lines.append, work=str(tmp_path / "work"))

    pdmux = results["systems"]["sglang-pdmux"]
    assert pdmux["status"] == "skipped" and pdmux["runs"] == []
    assert "GPU" in pdmux["reason"]
    assert any("sglang-pdmux: skipped" in line for line in lines)
    assert "sglang-pdmux: skipped" in (tmp_path / "out" / "smoke.md").read_text()
    saved = json.loads((tmp_path / "out" / "smoke.json").read_text())
    assert saved["systems"]["sglang-pdmux"]["status"] == "skipped" and saved["stamp"]["commit"]
