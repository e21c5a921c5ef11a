"""CPU smoke run of the comparison: 2 systems x 1 QPS x 20 requests, table and plots written."""

from __future__ import annotations

import json
import os

import pytest

from benchmark.serving.compare import Config, compare
from benchmark.serving.systems import parse_systems
from sglang_duet.local_server import cuda_available


@pytest.mark.server
def test_cpu_smoke_two_systems_one_qps(tmp_path):
    if cuda_available():
        pytest.skip("CPU smoke test (on a GPU run python -m benchmark.serving with a real model)")
    from sglang_duet.tiny_model import default_model_path

    cfg = Config(
        trace="azure_conv", qps=[2.0], systems=parse_systems("sglang-chunked,sglang-pdmux,duet"),
        model=str(default_model_path()), num_requests=20, scale=0.05, chunked_prefill_size=64,
        tag="smoke", out_dir=str(tmp_path / "out"), warmup_pass=False,
    )
    lines: list[str] = []
    results = compare(cfg, progress=lines.append, work=str(tmp_path / "work"))

    systems = results["systems"]
    assert systems["sglang-pdmux"]["status"] == "skipped"
    assert "GPU" in systems["sglang-pdmux"]["reason"]
    for name in ("sglang-chunked", "duet"):
        assert systems[name]["status"] == "ran", systems[name]["reason"]
        (run,) = systems[name]["runs"]
        assert run["summary"] is not None, run.get("error")
        assert run["summary"]["completed"] == 20 and run["summary"]["failed"] == 0
        assert run["summary"]["total_output_tokens"] == sum(
            json.loads(x)["output_len"] for x in open(tmp_path / "work" / "requests_qps2.jsonl"))
        assert any(line.startswith(f"[serving] {name} qps=2") for line in lines)

    table = open(tmp_path / "out" / "smoke.md").read()
    assert "| sglang-chunked | 2.0 | 20/20 |" in table and "| duet | 2.0 | 20/20 |" in table
    assert "sglang-pdmux: skipped" in table
    for kind in ("ttft", "tbt", "throughput"):
        assert os.path.getsize(tmp_path / "out" / f"smoke_{kind}.png") > 0
