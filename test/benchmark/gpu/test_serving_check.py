"""Stage 2 of the GPU check, dry-run on the CPU with the embedded tiny model: the same steps
(a spatial warmup server answering the equality prompts, bench_serving vs stock SGLang, latency
model vs plan log, an aggregated server's answers compared with the warmup's) through real
SGLang servers, so its logic is tested without a GPU."""

from __future__ import annotations

import json

import pytest

from benchmark.gpu.serving_check import QWEN3_8B, STEPS, main, qwen3_8b_dir


def test_steps_are_the_plans_stage_2_steps():
    """check.sh runs serving_check once per step (--only), each under the plan's cap."""
    from benchmark.gpu.plan import steps

    assert [s.name for s in steps("2") if s.name != "imports"] == list(STEPS)


def test_an_unknown_step_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        main([str(tmp_path / "s.json"), "--cpu-dry-run", "--only", "nonsense"])


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
    # SGLang's pdmux needs CUDA streams: the CPU rehearsal leaves it out
    rc = main([str(out), "--cpu-dry-run", "--work", str(tmp_path / "w"), "--budget-s", "900",
               "--skip", "pdmux"])
    body = json.loads(out.read_text())
    steps = body["steps"]
    warm = steps["warmup"]
    assert warm["ok"] and warm["answered"] and warm["iterations_by_mode"].get("spatial", 0) > 0
    # streamed, and the delivery figures made (not judged: the CPU has no decode stream; the
    # figures' logic is test_delivery.py's)
    dl = warm["delivery"]
    assert dl["ok"] is None and "not judged" in dl["note"]
    assert dl["tokens_after_first"] > 0 and 0.0 <= dl["bunched_share"] <= 1.0
    eq = steps["equality"]
    assert eq["prompts"] == 32 and eq["ok"] and eq["diverged"] == 0, eq
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
    assert "pdmux" not in steps
    assert rc == 0 and body["ok"] and body["stamp"]["commit"]
