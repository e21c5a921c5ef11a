"""``python -m sglang_duet.sim``: replay a trace through one policy (or all) and report metrics.

Exit codes: 0 done; 2 bad arguments, unknown names, unreadable traces, impossible configs
(each reported as one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from sglang_duet.cli_args import add_dataclass_args, check_fields, from_namespace
from sglang_duet.latency import HARDWARE, MODELS
from sglang_duet.latency.hardware import HARDWARE_ALIASES
from sglang_duet.partition.plan import PLANNED_BACKENDS
from sglang_duet.policy import POLICY_MODES

from .arrivals import Workload, build_arrivals
from .config import AUTO_ROUTER, SimConfig
from .engine import Simulation
from .metrics import summarize
from .plan_log import PlanLog
from .policies import policy_names
from .router import ROUTERS
from .steady import steady_state
from .traces import TraceError, load_trace

__all__ = ["main", "run_config"]

_CHOICES: dict[str, list[str]] = {
    "policy": [*policy_names(), "all"],
    "model": sorted(MODELS),
    "hardware": [*sorted(HARDWARE), *sorted(HARDWARE_ALIASES)],
    "duet_mode": list(POLICY_MODES),
    "router": [AUTO_ROUTER, *ROUTERS],
    "partition_backend": list(PLANNED_BACKENDS),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sglang_duet.sim",
                                description=(__doc__ or "").split("\n")[0])
    add_dataclass_args(p, SimConfig, choices=_CHOICES)
    p.add_argument("--out", default=None, help="write the full metrics + config as JSON here")
    p.add_argument("--quiet", action="store_true", help="no summary, no progress bar")
    p.add_argument("--plan-log", default=None, metavar="PATH",
                   help="one policy only: every executed plan as a JSON line in PATH.dp<replica>, "
                        "as --duet-plan-log writes them (python -m sglang_duet.plan_view PATH.dp0)")
    return p


def _check_names(cfg: SimConfig) -> None:
    for name, choices in _CHOICES.items():
        value = getattr(cfg, name)
        if value not in choices:
            raise ValueError(f"unknown {name.replace('_', '-')} {value!r}; "
                             f"choices: {', '.join(choices)}")


class _Progress:
    def __init__(self, label: str, enabled: bool) -> None:
        self.label, self.enabled, self._last = label, enabled, -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        pct = int(100 * done / max(total, 1))
        if pct != self._last:
            self._last = pct
            bar = "#" * (pct // 4)
            sys.stderr.write(f"\r{self.label:>15} [{bar:<25}] {pct:3d}% ({done}/{total})")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def run_config(cfg: SimConfig, workload: Workload | None = None, show_progress: bool = False,
               plan_log: str | None = None) -> dict[str, Any]:
    """Run ``cfg`` (``policy='all'`` runs every policy on the same arrivals); JSON-ready dict.
    ``plan_log``: write each replica's plan log to ``<plan_log>.dp<i>`` (one policy only)."""
    cfg.validate()
    _check_names(cfg)
    if workload is None:
        workload = build_arrivals(load_trace(cfg.trace), cfg.qps, cfg.num_requests, cfg.seed)
    names = policy_names() if cfg.policy == "all" else [cfg.policy]
    sims = [Simulation(cfg, workload, name) for name in names]  # config errors before any run
    if plan_log and len(sims) != 1:
        raise ValueError("--plan-log needs one --policy, not 'all'")
    if plan_log and not os.path.isdir(os.path.dirname(plan_log) or "."):
        raise ValueError(f"--plan-log {plan_log}: directory does not exist")
    logs = [PlanLog(rep) for rep in sims[0].replicas] if plan_log else []
    results: dict[str, Any] = {}
    for sim in sims:
        prog = _Progress(sim.spec.name, show_progress and len(workload) >= 2000)
        res = sim.run(prog)
        m = summarize(res, cfg.tbt_slo_ms / 1e3, cfg.ttft_slo_ms / 1e3)
        try:
            m["steady"] = steady_state(res, cfg.tbt_slo_ms / 1e3, cfg.ttft_slo_ms / 1e3)
        except ValueError:  # too few requests for a steady-state window
            m["steady"] = None
        m["setup"] = {
            "topology": sim.spec.topology,
            "replicas": len(sim.replicas),
            "replica_tp": sim.replica_tp,
            "flavor": sim.spec.flavor,
            "router": sim.router_name,  # resolved: the system's own where cfg.router is "auto"
            "kv": sim.sizing.to_dict(),
        }
        results[sim.spec.name] = m
    for i, log in enumerate(logs):
        log.write(f"{plan_log}.dp{i}")
    return {"config": {**cfg.to_dict(), "workload": workload.summary()}, "results": results}


_COLS = (("completed", "done", "{:.0f}"), ("throughput_rps", "req/s", "{:.2f}"),
         ("output_tps", "out tok/s", "{:.0f}"), ("ttft_p50_ms", "TTFT p50", "{:.0f}"),
         ("ttft_p99_ms", "TTFT p99", "{:.0f}"), ("tbt_p50_ms", "TBT p50", "{:.1f}"),
         ("tbt_p99_ms", "TBT p99", "{:.1f}"), ("tbt_max_ms", "TBT max", "{:.0f}"),
         ("slo_attainment", "SLO att", "{:.3f}"), ("goodput_rps", "goodput", "{:.2f}"))


def format_table(report: dict[str, Any]) -> str:
    head = f"{'policy':<15}" + "".join(f"{h:>10}" for _, h, _ in _COLS) + "  modes"
    lines = [head]
    for name, m in report["results"].items():
        row = f"{name:<15}"
        for key, _, fmt in _COLS:
            v = m.get(key)
            row += f"{'-' if v is None else fmt.format(v):>10}"
        modes = " ".join(f"{k}={v:.0%}" for k, v in m["mode_share"].items() if v >= 0.005)
        lines.append(row + "  " + modes)
    return "\n".join(lines)


def format_summary(report: dict[str, Any]) -> str:
    c = report["config"]
    w = c["workload"]
    top = (f"{w['description']} | {c['model']} on {c['gpus']}x {c['hardware']} (tp {c['tp']}) | "
           f"mean in/out {w['mean_input']}/{w['mean_output']} | tau={c['tbt_slo_ms']:g} ms, "
           f"TTFT SLO {c['ttft_slo_ms']:g} ms (times in ms)")
    extra = []
    for name, m in report["results"].items():
        if m.get("mean_sms_decode") is not None:
            extra.append(f"{name}: mean S_d {m['mean_sms_decode']:.1f} SMs, "
                         f"mean k {m['mean_lookahead']:.2f}")
        causes = ", ".join(f"{c} {n}" for c, n in (m.get("gap_causes") or {}).items() if n)
        if causes:
            extra.append(f"{name}: {m['gaps_over_tau']} gaps > tau: {causes}")
        if m["rejected"] or m["preemptions"]:
            extra.append(f"{name}: {m['rejected']} rejected (do not fit KV), "
                         f"{m['preemptions']} preemptions")
    return "\n".join([top, format_table(report), *extra])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = from_namespace(SimConfig, args)
        check_fields(cfg, choices=_CHOICES)  # one-line errors naming the flag, finite times
        report = run_config(cfg, show_progress=not args.quiet, plan_log=args.plan_log)
    except (TraceError, ValueError) as e:
        print(f"sglang_duet.sim: error: {e}", file=sys.stderr)
        return 2
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    if not args.quiet:
        print(format_summary(report))
    return 0
