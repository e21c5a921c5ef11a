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
        "sim_shared_minus_real": _gaps(systems, "sim_shared"),
        "sim_contended_minus_real": _gaps(systems, "sim_contended"),
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
        "```", *([results["measured_command"] + "   # the real runs"]
                 if results.get("measured_command") else []),
        results.get("command") or "python -m benchmark.sim_to_real.admission", "```", "",
        f"{w['requests']} consecutive Mooncake requests from index {w['start']}, lengths x "
        f"{cfg['scale']:g} (prompt tokens {w['prompt_pct']}, mean {w['mean_input']:.0f}; "
        f"output mean {w['mean_output']:.1f}), Poisson arrivals at {cfg['qps']:g} req/s (seed "
        f"{cfg['seed']}). TTFT SLO {slo['used_ms']:g} ms (the GPU's 10 s x CPU prefill of the "
        f"mean scaled prompt {slo['cpu_prefill_s']} s / GPU prefill of the mean full prompt "
        f"{slo['gpu_prefill_s']} s).", "",
        "Attainment: share of the requests whose first token came within the SLO (measured: "
        "every pass's requests pooled, i.e. the passes' mean). sim: the "
        "simulator on each system's committed CPU profile (duet's: fitted to its plan log); "
        "shared: every system on stock SGLang's profile; contended: each own profile with "
        "every time x the slowdown the run's own SGLang log shows against it (other jobs on "
        "this machine); "
        "refit: a profile fitted to this run's SGLang log (whole-second stamps: rough).", "",
        "| system | measured (each pass) | sim | shared | contended (slowdown) | refit | "
        "P99 TTFT ms real / sim | max TTFT ms real / sim | longest tenth real / sim |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, e in results["systems"].items():
        r, s, c = e.get("real") or {}, e.get("sim") or {}, e.get("sim_contended") or {}
        lines.append(
            f"| {name} | {_g(r, 'attainment')} {_passes(e)} | "
            f"{s.get('error') or _g(s, 'attainment')} | "
            f"{_g(e.get('sim_shared') or {}, 'attainment')} | "
            f"{_g(c, 'attainment')} ({_g(c, 'slowdown')}) | "
            f"{_g(e.get('sim_refit') or {}, 'attainment')} | {_g(r, 'ttft_p99_ms')} / "
            f"{_g(s, 'ttft_p99_ms')} | {_g(r, 'ttft_max_ms')} / {_g(s, 'ttft_max_ms')} | "
            f"{_g(r, 'longest_tenth_attainment')} / {_g(s, 'longest_tenth_attainment')} |")
    v = results["verdict"]
    lines += ["", f"Duet above both stock orders (measured): {v['duet_above_stock']}. Simulated "
              f"minus measured attainment (target within {TARGET_GAP}): sim "
              f"{v['sim_minus_real']}; shared {v['sim_shared_minus_real']}; contended "
              f"{v['sim_contended_minus_real']}.", "",
              "Servers:", ""]
    lines += [f"- `{k}`: `{e['command']}`" for k, e in results["systems"].items()
              if e.get("command")]
    return "\n".join(lines) + "\n"


def _g(d: dict, k: str) -> str:
    return "-" if d.get(k) is None else str(d[k])


def _passes(e: dict) -> str:
    got = [p.get("attainment") for p in e.get("real_passes") or []]
    return f"({', '.join(str(a) for a in got)})" if got else ""
