"""Stage 2 of the GPU check, dry-run on the CPU with the embedded tiny model: the same steps
(aggregated vs spatial equality, latency model vs plan log, bench_serving vs stock SGLang)
through real SGLang servers, so its logic is tested without a GPU."""

from __future__ import annotations

import json

import pytest

from benchmark.gpu.serving_check import QWEN3_8B, compare_outputs, main, qwen3_8b_dir


def test_compare_outputs_finds_the_first_difference():
    same = compare_outputs([[1, 2, 3], [4, 5]], [[1, 2, 3], [4, 5]])
    assert same["ok"] and same["equal"] == 2
    diff = compare_outputs([[1, 2, 3], [4, 5]], [[1, 9, 3], [4, 5, 6]])
    assert not diff["ok"] and diff["equal"] == 0 and diff["first_diff_positions"] == [1, 2]


def test_qwen3_8b_dir_has_the_shapes_and_a_tokenizer(tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    d = qwen3_8b_dir(tmp_path / "m")
    cfg = AutoConfig.from_pretrained(d)
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.vocab_size) == (36, 4096, 151936)
    assert QWEN3_8B["num_key_value_heads"] == cfg.num_key_value_heads == 8
    assert AutoTokenizer.from_pretrained(d)("def f(): pass")["input_ids"]


def test_without_a_gpu_it_refuses_unless_dry_run(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert main([str(tmp_path / "s.json")]) == 2
    assert "needs a CUDA device" in capsys.readouterr().err


@pytest.mark.server
def test_cpu_dry_run_all_steps(tmp_path):
    out = tmp_path / "stage2.json"
    rc = main([str(out), "--cpu-dry-run", "--work", str(tmp_path / "w"), "--budget-s", "900"])
    body = json.loads(out.read_text())
    steps = body["steps"]
    assert steps["equality"]["prompts"] == 32 and steps["equality"]["ok"], steps["equality"]
    assert steps["equality"]["spatial_iterations"].get("spatial", 0) > 0
    # streamed, and the delivery figures made (not judged: the CPU has no decode stream; the
    # figures' logic is test_delivery.py's)
    for dl in steps["equality"]["delivery"].values():
        assert dl["ok"] is None and "not judged" in dl["note"]
        assert dl["tokens_after_first"] > 0 and 0.0 <= dl["bunched_share"] <= 1.0
    lat = steps["latency_model"]["by_mode"]
    assert lat and all(m["iterations"] > 0 and m["meas_ms_median"] > 0 for m in lat.values())
    serving = steps["serving"]
    assert serving["ok"], serving
    work = tmp_path / "w"
    for name in ("sglang-chunked", "duet"):  # benchmark.serving's whole CPU path, per system
        runs = serving["systems"][name]["runs"]
        assert [r["qps"] for r in runs] == [4.0]
        for r in runs:
            assert r["summary"]["completed"] == 8 and r["summary"]["failed"] == 0
            sent = work / "serving_work" / "requests_qps4.jsonl"  # same lengths at every QPS
            assert r["summary"]["total_output_tokens"] == sum(
                json.loads(line)["output_len"] for line in sent.open())
        table = (work / "serving" / f"serving_{name}.md").read_text()
        assert f"| {name} | 4.0 | 8/8 |" in table
        for kind in ("ttft", "tbt", "throughput"):
            assert (work / "serving" / f"serving_{name}_{kind}.png").stat().st_size > 0
        sim = serving["systems"][name]["simulated"]  # the simulator's prediction of each run
        assert set(sim["points"]) == {"4"}
        assert all(p["predicted"]["completed"] == 8 for p in sim["points"].values())
        assert serving["sim_vs_real"][name]["4"]["ttft_p50_ms"] > 0
    assert rc == 0 and body["ok"] and body["stamp"]["commit"]
