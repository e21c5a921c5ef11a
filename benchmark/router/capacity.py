"""Router capacity in the simulator: per router, the highest Poisson QPS at which >= 90% of
requests meet both SLOs (their own P99 TBT <= tau and TTFT <= the TTFT SLO).

Every router sees the same sampled requests and arrival gaps (one seed), scaled to each QPS; the
replicas run the duet policy. The search doubles the rate until a run fails the SLO share, then
bisects to `rel_tol`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sglang_duet.sim import SimConfig, build_arrivals, simulate, summarize

__all__ = ["SETUPS", "Setup", "capacity", "good_share"]

GOOD_SHARE = 0.9


@dataclass(frozen=True)
class Setup:
    """One cluster: a model on `gpus` GPUs of `hardware`, `tp` GPUs per replica."""

    name: str
    model: str
    gpus: int
    tp: int
    hardware: str = "h100-sxm"


SETUPS = (
    Setup("qwen3-8b-8xh100-tp1", "qwen3-8b", 8, 1),
    Setup("qwen3-14b-8xh100-tp2", "qwen3-14b", 8, 2),
    Setup("qwen3-8b-4xh100-tp1", "qwen3-8b", 4, 1),
    Setup("qwen3-14b-4xh100-tp2", "qwen3-14b", 4, 2),
)


def good_share(cfg: SimConfig, trace, n: int) -> tuple[float, dict]:
    """Share of all `n` sampled requests (rejected ones count as failing) meeting both SLOs."""
    res = simulate(cfg, build_arrivals(trace, cfg.qps, n, cfg.seed))
    m = summarize(res, cfg.tbt_slo_ms / 1e3, cfg.ttft_slo_ms / 1e3)
    good = round((m["goodput_rps"] or 0.0) * (m["duration_s"] or 0.0))
    return good / n, m


def capacity(base: SimConfig, trace, n: int, start_qps: float, rel_tol: float = 0.03
             ) -> tuple[float, list[dict]]:
    """(highest passing QPS, every probe run). 0.0 when even `start_qps / 64` fails."""
    if not start_qps > 0:
        raise ValueError(f"start_qps must be > 0, got {start_qps}")
    probes: list[dict] = []

    def ok(qps: float) -> bool:
        share, m = good_share(replace(base, qps=qps), trace, n)
        probes.append({"qps": round(qps, 4), "good_share": round(share, 4),
                       "ttft_p99_ms": m["ttft_p99_ms"], "tbt_p99_ms": m["tbt_p99_ms"]})
        return share >= GOOD_SHARE

    lo, hi = 0.0, start_qps
    while ok(hi):
        lo, hi = hi, hi * 2
    if lo == 0.0:
        hi_fail = hi
        while hi_fail > start_qps / 64:
            hi_fail /= 2
            if ok(hi_fail):
                lo = hi_fail
                break
            hi = hi_fail
        if lo == 0.0:
            return 0.0, probes
    while hi - lo > rel_tol * lo:
        mid = (lo + hi) / 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo, probes
