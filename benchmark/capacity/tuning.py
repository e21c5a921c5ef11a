"""The knobs each system's users turn for a 100 ms TBT SLO, and the search for the best setting.

Per policy, the knob (SimConfig fields), what a user sets, the default, the values tried:

* sglang-chunked, sglang-default: ``token_budget`` = ``--chunked-prefill-size``; default 8192
  (SGLang on an 80-141 GB GPU, ``ServerArgs._handle_gpu_memory_settings``); 256 ... 8192.
* vllm-chunked: ``token_budget`` = ``--max-num-batched-tokens``; 8192 (the paper's vLLM runs);
  256 ... 8192.
* sglang-pdmux: ``pdmux_decode_bs_divisor`` and ``pdmux_split_forward_budget`` (the
  ``--pdmux-config-path`` YAML's ``decode_bs_divisor``, ``split_forward_token_budget``) and
  ``pdmux_max_prefill_tokens`` (``--max-prefill-tokens``); 36, 65536, 16384 (``PDMuxConfig``,
  ``ServerArgs``); 9 ... 288, 16K ... 256K, 4K ... 32K tokens.
* dynamo: ``kv_xfer_gbps``, the KV connector's throughput (``NixlConnector`` measured at
  4.3 GB/s, ``NixlPushConnector`` at 49 GB/s; ``sim.disagg``); and on 4 or more GPUs the xPyD
  split (``disagg_prefill`` / ``disagg_decode``); 4.3 GB/s, 1P1D.
* duet: ``token_budget`` = ``--chunked-prefill-size`` (2048 ... 16384), then
  ``duet_backlog_share`` = ``--duet-backlog-share`` with ``max_lookahead`` =
  ``--duet-max-lookahead`` as one knob ((0, 16): the automatic share, then the fixed shares
  (1, 16), (0.5, 16), (0.5, 64), (0.3, 64)): a faster decode step under backlog needs more
  steps to cover a prefill, and azure-conv paid only with both (36.0 -> 38.8 req/s with 0.3
  and 64 on the keep-up rule of the time; either alone moved it < 5%, which coordinate descent
  does not take); then ``max_lookahead`` alone (8 ... 64) and ``duet_tbt_headroom_ms`` =
  ``--duet-tbt-headroom-ms`` (5 ... 20 ms); defaults 8192, 0 (automatic), 16, 10% of the SLO.
  Then ``duet_admission`` = ``--duet-admission`` (deadline, its default; fcfs:
  `sglang_duet.policy.admission`); not ``sjf``, which wins by parking long prompts (azure-code
  Qwen3-8B: 36.4 against 34.2 req/s, but 55% of the longest-prompt tenth within the TTFT SLO
  and a P99 TTFT of 30.7 s, the aging bound, where vllm-chunked keeps 100% and 4.0 s).
  duet-paper (the paper's scheme, kept for reference): ``token_budget`` only.

The SGLang-based systems (sglang-chunked, sglang-default, sglang-pdmux) then try SGLang
0.5.17's ``--schedule-policy`` (``schedule_policy``; default ``fcfs``, the starting point; then
``lpm``, ``dfs-weight``, ``lof``, each as SGLang computes it: `sglang_duet.sim.sglang_orders`),
after the server's own knobs (the order decides which prompt a chunk budget goes to, so it is
tried on the budget it will run with) and before the router (which routes to replicas that
already order their queues). ``hrrn``, added after 0.5.17 (SGLang PR #32911), is not a value a
0.5.17 user has: the sweep runs it on top of the best setting as a reference row
(``HRRN_REFERENCE``, `sweep.sweep_policy`). A policy the cluster pins (``--set
schedule_policy=...``) is not tuned.

With more than one replica, every system whose users pick how requests are spread across them
tries those choices last (``router``, once the server's own knobs are set: at a default an
untuned server may gain nothing from any router, as SGLang's 8192-token chunk on mooncake
did, and the descent would never come back to it): SGLang's ``--load-balance-method``
(round-robin, its default; total-requests; total-tokens) for sglang-chunked, sglang-default and
sglang-pdmux; sglang-duet's ``--duet-router`` (the latency-model router, its default, and
least-tokens, plus SGLang's three; it also takes vLLM's rule, left out as no SGLang user's
choice) for duet. vLLM's data-parallel balancer has no choice to make (with a dense model it
alternates, `router.rules.VllmDpRouter`), and Dynamo's 1P1D has one prefill worker to route
to. A router the cluster pins (``--set router=...``) is not tuned.

The search is coordinate descent from the defaults: knob by knob, every value with the other
knobs at their best so far; a value replaces the current one only if its capacity is higher
(``find_capacity`` at the coarse tolerance). Every knob's values and capacities are kept in the
results, so the best setting is named and the sweep shows how much each knob moves.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sglang_duet.latency import get_model
from sglang_duet.sim.policies import POLICIES

__all__ = ["HRRN_REFERENCE", "KNOBS", "ROUTER_CHOICES", "SCHEDULE_POLICIES", "Knob",
           "knobs_for"]

CHUNKS = (256, 512, 1024, 1536, 2048, 3072, 4096, 6144, 8192)


@dataclass(frozen=True)
class Knob:
    """One knob: a name for the tables and its values, each a dict of SimConfig fields."""

    name: str
    values: tuple[dict[str, Any], ...]


def _one(field: str, values: Iterable[Any]) -> Knob:
    return Knob(field, tuple({field: v} for v in values))


SGLANG_ROUTERS = ("round-robin", "total-requests", "total-tokens")
ROUTER_CHOICES: dict[str, tuple[str, ...]] = {
    "sglang-chunked": SGLANG_ROUTERS,
    "sglang-default": SGLANG_ROUTERS,
    "sglang-pdmux": SGLANG_ROUTERS,
    "duet": ("duet", "least-tokens", *SGLANG_ROUTERS),
}

# SGLang 0.5.17's --schedule-policy values a user of these systems tries, fcfs (the default)
# being the starting point; hrrn (after 0.5.17) runs on top of the best setting as a reference
SCHEDULE_POLICIES = ("lpm", "dfs-weight", "lof")
SCHEDULED = ("sglang-chunked", "sglang-default", "sglang-pdmux")
HRRN_REFERENCE = SCHEDULED

KNOBS: dict[str, tuple[Knob, ...]] = {
    "sglang-chunked": (_one("token_budget", CHUNKS),),
    "vllm-chunked": (_one("token_budget", CHUNKS),),
    "sglang-default": (_one("token_budget", CHUNKS),),
    "sglang-pdmux": (
        _one("pdmux_decode_bs_divisor", (9, 18, 36, 72, 144, 288)),
        _one("pdmux_split_forward_budget", (16384, 65536, 262144)),
        _one("pdmux_max_prefill_tokens", (4096, 8192, 16384, 32768)),
    ),
    "dynamo": (_one("kv_xfer_gbps", (4.3, 49.0)),),
    "duet": (_one("token_budget", (2048, 4096, 8192, 16384)),
             # jointly: a faster decode step under backlog needs more steps to cover a prefill
             Knob("duet_backlog_share, max_lookahead", tuple(
                 {"duet_backlog_share": b, "max_lookahead": k}
                 for b, k in ((0.0, 16), (1.0, 16), (0.5, 16), (0.5, 64), (0.3, 64)))),
             _one("max_lookahead", (8, 16, 32, 64)),
             _one("duet_tbt_headroom_ms", (5.0, 10.0, 20.0)),
             _one("duet_admission", ("deadline", "fcfs"))),
    "duet-paper": (_one("token_budget", (2048, 4096, 8192, 16384)),),
}


def xpyd(gpus: int, model: str) -> Knob | None:
    """Every x prefill + y decode worker split of ``gpus`` whose TP (``gpus / (x + y)``) the
    model shards over; None when 1P1D is the only one."""
    out = []
    for workers in range(2, gpus + 1):
        if gpus % workers:
            continue
        try:
            get_model(model, gpus // workers)
        except ValueError:
            continue
        out += [{"disagg_prefill": x, "disagg_decode": workers - x} for x in range(1, workers)]
    return Knob("xPyD", tuple(out)) if len(out) > 1 else None


def knobs_for(policy: str, gpus: int, model: str, quick: bool = False, tp: int = 1,
              route: bool = True, schedule: bool = True) -> tuple[Knob, ...]:
    """The knobs searched for ``policy`` on this cluster (``quick``: two values per knob);
    ``schedule_policy`` after the server's own knobs for the SGLang-based systems, unless the
    cluster pins it (``schedule`` False); ``router`` last where there are ``gpus / tp`` > 1
    replicas to route among, unless the cluster pins the router (``route`` False: every run
    uses the one it sets)."""
    knobs = KNOBS.get(policy, ())
    if policy in SCHEDULED and schedule:
        knobs = (*knobs, _one("schedule_policy", SCHEDULE_POLICIES))
    own = POLICIES[policy].router  # the starting point, already run as the defaults
    many = gpus // tp > 1 and route
    routers = tuple(r for r in ROUTER_CHOICES.get(policy, ()) if r != own) if many else ()
    if routers:
        knobs = (*knobs, _one("router", routers))
    if policy == "dynamo":
        split = xpyd(gpus, model)
        knobs = knobs + ((split,) if split else ())
    if quick:
        knobs = tuple(Knob(k.name, (k.values[0], k.values[-1])) for k in knobs)
    return knobs
