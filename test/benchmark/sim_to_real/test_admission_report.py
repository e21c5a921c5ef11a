"""The admission benchmark's verdict and table: duet against both stock orders, each
simulated attainment against the measured one."""

from __future__ import annotations

from benchmark.sim_to_real import admission_report as rep


def entry(real: float | None, sim: float | None, refit: float | None = None) -> dict:
    e: dict = {"sim": {"attainment": sim} if sim is not None else {"error": "no lpm"},
               "command": "launch"}
    if real is not None:
        e["real"] = {"attainment": real, "ttft_p99_ms": 1.0, "ttft_max_ms": 2.0,
                     "longest_tenth_attainment": 0.5}
    if refit is not None:
        e["sim_refit"] = {"attainment": refit}
    return e


def test_verdict_compares_duet_with_both_stock_orders_and_the_sim_with_the_real():
    systems = {"sglang-fcfs": entry(0.3, 0.35), "sglang-lpm": entry(0.4, None),
               "duet-deadline": entry(0.6, 0.45, refit=0.55)}
    v = rep.verdict(systems)
    assert v["duet_above_stock"] is True
    assert v["sim_minus_real"] == {"sglang-fcfs": 0.05, "duet-deadline": -0.15}
    assert v["sim_within_0.1"] == {"sglang-fcfs": True, "duet-deadline": False}
    assert v["sim_refit_minus_real"] == {"duet-deadline": -0.05}
    systems["sglang-lpm"] = entry(0.6, 0.6)  # a tie is not above
    assert rep.verdict(systems)["duet_above_stock"] is False
    del systems["duet-deadline"]["real"]  # not measured yet: no verdict
    assert rep.verdict(systems)["duet_above_stock"] is None


def test_markdown_lists_every_system_and_the_missing_prediction():
    systems = {"sglang-fcfs": entry(0.3, 0.35), "sglang-lpm": entry(0.4, None)}
    systems["sglang-fcfs"]["real_passes"] = [{"attainment": 0.25}, {"attainment": 0.35}]
    results = {"config": {"sim_only": False, "scale": 1 / 64, "qps": 3.0, "seed": 0},
               "workload": {"requests": 150, "start": 7, "prompt_pct": {"p50": 100.0},
                            "mean_input": 190.0, "mean_output": 5.0},
               "slo": {"used_ms": 10000.0, "cpu_prefill_s": 1.0, "gpu_prefill_s": 1.0},
               "systems": systems, "verdict": rep.verdict(systems)}
    md = rep.markdown(results)
    assert "| sglang-fcfs | 0.3 (0.25, 0.35) | 0.35 | - | - (-) | - |" in md
    assert "| sglang-lpm | 0.4  | no lpm | - | - (-) | - |" in md
    assert "python -m benchmark.sim_to_real.admission" in md
    results["measured_command"] = "python -m benchmark.sim_to_real.admission --passes 2"
    results["command"] = "python -m benchmark.sim_to_real.admission --keep old.json"
    md = rep.markdown(results)
    assert md.index("--passes 2   # the real runs") < md.index("--keep old.json")
