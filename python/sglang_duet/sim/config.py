"""SimConfig: one frozen record of everything a simulation run depends on (the CLI's fields)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

from sglang_duet.policy.backlog import BACKLOG_DECODE_SHARE

__all__ = ["AUTO_ROUTER", "SCHEDULE_POLICIES", "SimConfig"]

AUTO_ROUTER = "auto"  # each system's own default router (PolicySpec.router)
# SGLang's --schedule-policy values the simulator follows (sim/schedule.py's SGLANG_ORDERS;
# hrrn: after 0.5.17)
SCHEDULE_POLICIES = ("fcfs", "lpm", "dfs-weight", "lof", "hrrn")


def _f(default, help: str):  # noqa: A002 - mirrors argparse's name
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class SimConfig:
    trace: str = _f("azure-conv", "azure-code, azure-conv, mooncake, or a CSV/JSONL path")
    policy: str = _f("duet", "policy name (see --policy choices), or 'all'")
    model: str = _f("qwen3-8b", "built-in model name, or a Hugging Face config.json / model dir")
    hardware: str = _f("h100-sxm", "built-in GPU profile, or a profile JSON (save_hardware)")
    calibration: str = _f("published-h100", "latency-model calibration: a name (published-h100: "
                          "fitted to published H100/H200 measurements; default: the priors) or "
                          "a JSON path")
    interference: str = _f("published", "slowdown of concurrent SM partitions beyond the HBM "
                           "cap: published (fitted to published co-location figures, "
                           "sglang_duet/latency/interference.py) or none")
    gpus: int = _f(2, "GPUs in the cluster")
    tp: int = _f(1, "tensor-parallel degree of one replica")
    qps: float | None = _f(None, "Poisson arrival rate (req/s); default: the trace's timestamps")
    num_requests: int | None = _f(None, "requests to replay (sampling rule: see arrivals.py)")
    seed: int = _f(0, "seed of the request sample and the Poisson arrivals")
    tbt_slo_ms: float = _f(100.0, "TBT SLO tau (ms): the duet policy's target and the metric's")
    ttft_slo_ms: float = _f(10000.0, "TTFT SLO (ms) for goodput")
    token_budget: int = _f(8192, "chunked-prefill token budget")
    max_lookahead: int = _f(16, "duet: most look-ahead decode steps per spatial iteration (K; "
                            "--duet-max-lookahead)")
    duet_mode: str = _f("adaptive", "duet policy mode: adaptive, aggregated or spatial")
    duet_tbt_headroom_ms: float | None = _f(None, "duet: ms of the TBT SLO kept for the front "
                                            "end's delivery (--duet-tbt-headroom-ms; default "
                                            "a tenth of the SLO)")
    duet_sized: bool = _f(True, "duet: weigh the SLO-sized mixed batch against the splits")
    duet_objective: str = _f("prefill", "duet: the split search's objective, prefill or tokens "
                             "(per second)")
    duet_backlog_share: float = _f(BACKLOG_DECODE_SHARE, "duet: while prompts queue, the decode "
                                   "step every option aims at, as a share of tau, or 0: "
                                   "automatic, following the KV pool (--duet-backlog-share)")
    partition_backend: str = _f("green-ctx", "duet's SM partitions: the menu the runtime builds "
                                "for this backend (green-ctx or libsmctrl; partition.plan)")
    decode_graph_sizes: int = _f(6, "duet: partition sizes with captured decode graphs "
                                 "(--duet-decode-graph-sizes; 0: eager spatial decode)")
    partition_min_sms: int = _f(16, "duet: fewest SMs per side of a split "
                                "(--duet-partition-min-sms)")
    duet_admission: str = _f("deadline", "duet: the order waiting prompts are admitted in "
                             "(--duet-admission: fcfs, deadline, sjf; policy/admission.py)")
    duet_aging: float = _f(3.0, "duet: a request waiting longer than this many TTFT SLOs goes "
                           "first (--duet-aging)")
    duet_ttft_per_token_ms: float = _f(0.0, "duet: ms of TTFT deadline added per prompt token "
                                       "(--duet-ttft-per-token-ms)")
    schedule_policy: str = _f("fcfs", "SGLang-based systems: --schedule-policy, the order "
                              "SGLang admits waiting requests in: fcfs, lpm, dfs-weight, lof "
                              "(SGLang 0.5.17), hrrn (after 0.5.17; sim/sglang_orders.py)")
    pdmux_decode_bs_divisor: int = _f(36, "sglang-pdmux: PDMuxConfig.decode_bs_divisor")
    pdmux_split_forward_budget: int = _f(65536, "sglang-pdmux: PDMuxConfig."
                                         "split_forward_token_budget (tokens x layers per loop)")
    pdmux_max_prefill_tokens: int = _f(16384, "sglang-pdmux: --max-prefill-tokens (whole "
                                       "requests per prefill batch)")
    disagg_prefill: int = _f(1, "dynamo: prefill workers (xPyD's x; each gpus / (x + y) GPUs)")
    disagg_decode: int = _f(1, "dynamo: decode workers (xPyD's y)")
    router: str = _f(AUTO_ROUTER, "request router across replicas (sglang_duet.router), or "
                     "auto: the system's own default (PolicySpec.router)")
    mem_fraction: float = _f(0.88, "share of GPU memory for weights + KV (SGLang's static)")
    kv_xfer_gbps: float = _f(4.3, "1P1D KV transfer throughput (GB/s, all transfers together): "
                             "vLLM NixlConnector as measured in vllm-project/vllm#50913")
    kv_xfer_setup_ms: float = _f(6.7, "1P1D fixed cost per KV transfer (ms): NIXL post time, "
                                 "vllm-project/vllm#50913")
    activation_reserve_gb: float = _f(2.0, "GPU memory kept for activations (GB)")
    # end-to-end costs (issue #22 item 5; each applies to every policy alike)
    frontend: bool = _f(True, "per-request front-end time: a FIFO intake server per replica "
                        "(HTTP, chat template, tokenize) and token delivery behind it "
                        "(sim/frontend.py; costs fitted to published runs)")
    frontend_costs: str | None = _f(None, "JSON of per-system front-end costs; default: the "
                                    "committed sim/frontend_costs.json")
    frontend_workers: int = _f(1, "front-end processes per replica, each taking every Nth "
                               "request in and streaming its tokens (SGLang --tokenizer-worker-"
                               "num with --detokenizer-worker-num, vLLM --api-server-count; "
                               "sim/frontend.py)")
    prefix_cache: bool = _f(True, "radix / automatic prefix cache hits from the trace's "
                            "hash_ids (sim/prefix_cache.py; SGLang and vLLM V1 default on)")
    running_caps: bool = _f(True, "each system's max running requests and CUDA-graph decode "
                            "batch cap (sim/caps.py)")
    max_running: int | None = _f(None, "requests one replica may hold (prefilling + running); "
                                 "default: the system's own default (sim/caps.py)")
    graph_max_bs: int | None = _f(None, "largest graph-replayed decode batch; larger ones pay "
                                  "eager launches; default: the system's (sim/caps.py)")
    sglang_schedule: bool = _f(True, "SGLang's default --schedule-policy fcfs: a retracted "
                               "request re-enters at the back of the waiting queue (vLLM: "
                               "front); off: at the front for every system")
    max_total_tokens: int | None = _f(None, "cap on the KV pool in tokens (SGLang's "
                                      "--max-total-tokens); default: what memory allows")
    kv_pool_scale: float = _f(1.0, "what-if, for diagnosis only: every replica's KV pool, as "
                              "sized, times this (no GPU has the memory; it asks whether the "
                              "pool is what binds, benchmark/results/capacity/kv-pool; the "
                              "capacity bounds ignore it)")
    page_size: int | None = _f(None, "KV page in tokens (SGLang's --page-size: 1 by default, "
                               "arg_groups/overrides.py _page_size_default); default: 16")

    def validate(self) -> SimConfig:
        """Raise ValueError (one line) on values no run can use."""
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"--{f.name.replace('_', '-')} must be a finite number")
        if self.gpus < 1 or self.tp < 1:
            raise ValueError("--gpus and --tp must be >= 1")
        if self.gpus % self.tp:
            raise ValueError(f"--gpus {self.gpus} is not a multiple of --tp {self.tp}")
        if self.qps is not None and not self.qps > 0:
            raise ValueError("--qps must be > 0")
        if self.num_requests is not None and self.num_requests < 1:
            raise ValueError("--num-requests must be >= 1")
        if self.tbt_slo_ms <= 0 or self.ttft_slo_ms <= 0:
            raise ValueError("SLOs must be > 0")
        if self.token_budget < 1 or self.max_lookahead < 1:
            raise ValueError("--token-budget and --max-lookahead must be >= 1")
        from sglang_duet.latency.interference import INTERFERENCE_NAMES
        from sglang_duet.router import ROUTERS

        if self.interference not in INTERFERENCE_NAMES:
            raise ValueError(f"unknown interference {self.interference!r}; choices: "
                             f"{', '.join(INTERFERENCE_NAMES)}")

        if self.router not in ROUTERS and self.router != AUTO_ROUTER:
            raise ValueError(f"unknown router {self.router!r}; choices: "
                             f"{', '.join((AUTO_ROUTER, *ROUTERS))}")
        if not self.kv_xfer_gbps > 0 or self.kv_xfer_setup_ms < 0:
            raise ValueError("--kv-xfer-gbps must be > 0 and --kv-xfer-setup-ms >= 0")
        from sglang_duet.policy.admission import AdmissionConfig

        AdmissionConfig(self.duet_admission, self.ttft_slo_ms / 1e3,
                        self.duet_ttft_per_token_ms / 1e3, self.duet_aging)
        if self.schedule_policy not in SCHEDULE_POLICIES:
            raise ValueError(f"unknown --schedule-policy {self.schedule_policy!r}; choices: "
                             f"{', '.join(SCHEDULE_POLICIES)}")
        if self.partition_min_sms < 1:
            raise ValueError("--partition-min-sms must be >= 1")
        if self.frontend_workers < 1:
            raise ValueError("--frontend-workers must be >= 1")
        if self.decode_graph_sizes < 0:
            raise ValueError("--decode-graph-sizes must be >= 0")
        if min(self.pdmux_decode_bs_divisor, self.pdmux_split_forward_budget,
               self.pdmux_max_prefill_tokens) < 1:
            raise ValueError("--pdmux-* values must be >= 1")
        if self.disagg_prefill < 1 or self.disagg_decode < 1:
            raise ValueError("--disagg-prefill and --disagg-decode must be >= 1")
        for name in ("max_running", "graph_max_bs"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
        if self.max_total_tokens is not None and self.max_total_tokens < 1:
            raise ValueError("--max-total-tokens must be >= 1")
        if self.page_size is not None and self.page_size < 1:
            raise ValueError("--page-size must be >= 1")
        if not self.kv_pool_scale > 0.0:
            raise ValueError("--kv-pool-scale must be > 0")
        if not 0.0 < self.mem_fraction <= 1.0:
            raise ValueError("--mem-fraction must be in (0, 1]")
        return self

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
