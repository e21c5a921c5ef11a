"""Duet metrics on SGLang's /metrics (Prometheus, multiprocess mode) and mode-switch log lines."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter as PyCounter
from typing import Any

from sglang_duet.policy import BatchPlan
from sglang_duet.policy.plan import MODES, plan_log_line

logger = logging.getLogger("sglang_duet.plan")
SUMMARY_S = 30.0  # one INFO summary line per this many seconds with work (like SGLang's)
# What a mode switch is for the INFO log: spatial vs not (decode-only and idle plans come and go
# every few iterations in adaptive mode; they are logged at DEBUG).
_SWITCH_CLASS = {"spatial": "spatial", "aggregated": "aggregated", "decode_only": "aggregated"}


class DuetMetrics:
    """Counters kept in-process (for tests and logs) and, with --enable-metrics, exported.

    Exported names (all prefixed ``sglang_duet:``): iterations_total{mode}, decode_sms, lookahead,
    predicted_iteration_seconds / measured_iteration_seconds (histograms, by mode),
    predicted_tbt_slo_misses_total, lookahead_tokens_discarded_total,
    lookahead_limited_total{reason} (spatial iterations that ran fewer look-ahead steps than
    planned, by `lookahead.REASONS` key, e.g. flashinfer).
    """

    def __init__(self, enabled: bool, labels: dict[str, str], plan_log: str | None = None,
                 clock=time.monotonic):
        self.counts: PyCounter[str] = PyCounter()
        self._clock = clock
        self._window: PyCounter[str] = PyCounter()
        self._window_start = clock()
        self._last_class: str | None = None
        self.spatial_decode_steps = 0
        self.discarded = 0
        self.slo_misses = 0
        self.lookahead_limited: PyCounter[str] = PyCounter()
        self.last_mode: str | None = None
        self._prom = _Prometheus(labels) if enabled else None
        self._plan_log = None
        if plan_log:
            path = f"{plan_log}.tp{labels['tp_rank']}.dp{labels['dp_rank']}"
            self._plan_log = open(path, "w", buffering=1)  # noqa: SIM115 - lives with the process

    def record(self, plan: BatchPlan, measured_s: float, tbt_slo_s: float, discarded: int,
               rank: int, decode_steps: int = 0, limited: str = "") -> None:
        """`limited`: why the spatial decode ran fewer look-ahead steps than planned, or ""."""
        self.counts[plan.mode] += 1
        if limited:
            self.lookahead_limited[limited] += 1
        self.discarded += discarded
        if plan.mode == "spatial":
            self.spatial_decode_steps += decode_steps
        if self._plan_log is not None:
            line = plan_log_line(plan, measured_s, decode_steps, limited, discarded,
                                 end_s=time.time())
            self._plan_log.write(json.dumps(line, sort_keys=True) + "\n")
        miss = plan.mode != "idle" and plan.predicted_tbt_s > tbt_slo_s and bool(plan.decode_rids)
        self.slo_misses += miss
        if self._prom is not None:
            self._prom.record(plan, measured_s, miss, discarded, decode_steps, limited)
        self._summarize(plan, miss, discarded)
        if plan.mode != self.last_mode:
            self.last_mode = plan.mode
            cls = _SWITCH_CLASS.get(plan.mode)
            switch = cls is not None and cls != self._last_class
            self._last_class = cls or self._last_class
            logger.log(
                logging.INFO if switch else logging.DEBUG,
                "duet-plan %s",
                json.dumps(
                    {
                        "rank": rank,
                        "mode": plan.mode,
                        "decodes": len(plan.decode_rids),
                        "prefill_tokens": plan.num_prefill_tokens,
                        "sms_decode": plan.sms_decode,
                        "sms_prefill": plan.sms_prefill,
                        "k": plan.lookahead,
                        "predicted_s": round(plan.predicted_total_s, 6),
                        "measured_s": round(measured_s, 6),
                        "reason": plan.reason,
                    },
                    sort_keys=True,
                ),
            )

    def _summarize(self, plan: BatchPlan, miss: bool, discarded: int) -> None:
        w = self._window
        w[plan.mode] += 1
        w["slo_misses_predicted"] += miss
        w["lookahead_discarded"] += discarded
        now = self._clock()
        if now - self._window_start < SUMMARY_S:
            return
        busy = {m: w[m] for m in MODES if m != "idle" and w[m]}
        if busy:
            logger.info("duet-plan summary %s", json.dumps(
                {"window_s": round(now - self._window_start, 1), "iterations": busy,
                 "slo_misses_predicted": w["slo_misses_predicted"],
                 "lookahead_discarded": w["lookahead_discarded"]}, sort_keys=True))
        self._window, self._window_start = PyCounter(), now


class _Prometheus:
    def __init__(self, labels: dict[str, str]):
        from prometheus_client import Counter, Gauge, Histogram

        names = list(labels)
        self.labels = labels
        buckets = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
        p = "sglang_duet:"
        self.iters = Counter(p + "iterations", "Iterations by plan mode", names + ["mode"])
        self.sms = Gauge(p + "decode_sms", "SMs of the last spatial plan's decode partition",
                         names, multiprocess_mode="mostrecent")
        self.k = Gauge(p + "lookahead", "Look-ahead steps of the last spatial plan", names,
                       multiprocess_mode="mostrecent")
        self.pred = Histogram(p + "predicted_iteration_seconds", "Predicted iteration time",
                              names + ["mode"], buckets=buckets)
        self.meas = Histogram(p + "measured_iteration_seconds", "Measured iteration time",
                              names + ["mode"], buckets=buckets)
        self.miss = Counter(p + "predicted_tbt_slo_misses", "Plans predicted to break the SLO",
                            names)
        self.disc = Counter(p + "lookahead_tokens_discarded", "Surplus look-ahead tokens dropped",
                            names)
        self.steps = Counter(p + "spatial_decode_steps", "Decode steps run by spatial plans",
                             names)
        self.limited = Counter(p + "lookahead_limited", "Spatial iterations with fewer "
                               "look-ahead steps than planned, by reason", names + ["reason"])
        # Every documented series exists from start-up, at 0 (a counter only appears once its
        # labels are first used).
        for counter in (self.miss, self.disc, self.steps):
            counter.labels(**labels)
        for mode in MODES:
            self.iters.labels(**labels, mode=mode)

    def record(self, plan: BatchPlan, measured_s: float, miss: bool, discarded: int,
               decode_steps: int, limited: str = "") -> None:
        lab: dict[str, Any] = self.labels
        self.iters.labels(**lab, mode=plan.mode).inc()
        if limited:
            self.limited.labels(**lab, reason=limited).inc()
        if plan.mode == "idle":
            return
        if plan.mode == "spatial":
            self.sms.labels(**lab).set(plan.sms_decode)
            self.k.labels(**lab).set(plan.lookahead)
            self.steps.labels(**lab).inc(decode_steps)
        self.pred.labels(**lab, mode=plan.mode).observe(plan.predicted_total_s)
        self.meas.labels(**lab, mode=plan.mode).observe(measured_s)
        if miss:
            self.miss.labels(**lab).inc()
        if discarded:
            self.disc.labels(**lab).inc(discarded)
