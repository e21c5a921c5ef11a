"""The admission benchmark's verdict and its Markdown table (`admission.py`)."""

from __future__ import annotations

TARGET_GAP = 0.1  # |simulated - measured attainment|, issue #48's target
STOCK = ("sglang-fcfs", "sglang-lpm")
DUET = "duet-deadline"


def verdict(systems: dict) -> dict:
    """Duet above both stock orders (measured), each prediction within `TARGET_GAP`."""
    att = {k: (v.get("real") or {}).get("attainment") for k, v in systems.items()}
    gaps = _gaps(systems, "sim")
    duet, stock = att.get(DUET), [att.get(s) for s in STOCK]
    return {
        "measured_attainment": att, "sim_minus_real": gaps,
        "sim_refit_minus_real": _gaps(systems, "sim_refit"),
        "duet_above_stock": None if duet is None or None in stock else all(
            duet > s for s in stock),  # type: ignore[operator]
        "sim_within_0.1": {k: abs(g) <= TARGET_GAP for k, g in gaps.items()},
    }


def _gaps(systems: dict, side: str) -> dict[str, float]:
    """Simulated minus measured attainment, per system that has both."""
    return {k: round(v[side]["attainment"] - v["real"]["attainment"], 4)
            for k, v in systems.items() if "attainment" in (v.get(side) or {}) and v.get("real")}


def markdown(results: dict) -> str:
    cfg, w, slo = results["config"], results["workload"], results["slo"]
    lines = [
        "# Admission order on real servers, this CPU (issue #48 item 6)", "",
        "```", "python -m benchmark.sim_to_real.admission"
        + (" --sim-only" if cfg["sim_only"] else ""), "```", "",
        f"{w['requests']} consecutive Mooncake requests from index {w['start']}, lengths x "
        f"{cfg['scale']:g} (prompt tokens {w['prompt_pct']}, mean {w['mean_input']:.0f}; "
        f"output mean {w['mean_output']:.1f}), Poisson arrivals at {cfg['qps']:g} req/s (seed "
        f"{cfg['seed']}). TTFT SLO {slo['used_ms']:g} ms (the GPU's 10 s x CPU prefill of the "
        f"mean scaled prompt {slo['cpu_prefill_s']} s / GPU prefill of the mean full prompt "
        f"{slo['gpu_prefill_s']} s).", "",
        "| system | measured attainment | sim | sim (profile refit on this run) | P99 TTFT ms "
        "real / sim | max TTFT ms real / sim | longest tenth real / sim |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, e in results["systems"].items():
        r, s, s2 = e.get("real") or {}, e.get("sim") or {}, e.get("sim_refit") or {}
        def g(d: dict, k: str) -> str:
            return "-" if d.get(k) is None else str(d[k])
        lines.append(f"| {name} | {g(r, 'attainment')} | {s.get('error') or g(s, 'attainment')}"
                     f" | {g(s2, 'attainment')} | {g(r, 'ttft_p99_ms')} / {g(s, 'ttft_p99_ms')}"
                     f" | {g(r, 'ttft_max_ms')} / {g(s, 'ttft_max_ms')} | "
                     f"{g(r, 'longest_tenth_attainment')} / {g(s, 'longest_tenth_attainment')} |")
    v = results["verdict"]
    lines += ["", f"Duet above both stock orders: {v['duet_above_stock']}; simulated minus "
              f"measured attainment: {v['sim_minus_real']} (target within {TARGET_GAP}).", ""]
    lines += [f"- `{k}`: `{e['command']}`" for k, e in results["systems"].items()
              if e.get("command")]
    return "\n".join(lines) + "\n"
