"""What the DuetServe paper (arXiv 2511.04791) reports, keyed the way ``experiments`` names runs.

Strings, because most claims are bounds or orderings ("TBT > 200 ms"), not single values. The
paper does not say which TBT statistic its end-to-end numbers are; we set them next to our P99.
"""

from __future__ import annotations

# (experiment, policy) -> {metric: claim}
CLAIMS: dict[tuple[str, str], dict[str, str]] = {
    ("azure-code-8b", "duet"): {"throughput_rps": "13.57 req/s", "tbt_p99_ms": "< 150 ms"},
    ("azure-code-8b", "vllm-chunked"): {"tbt_p99_ms": "> 200 ms"},
    ("azure-code-8b", "sglang-chunked"): {"tbt_p99_ms": "> 200 ms"},
    ("azure-code-8b", "sglang-default"): {"tbt_p99_ms": "> 680 ms, grows unbounded",
                                          "throughput_rps": "DuetServe is 1.1x this"},
    ("mooncake-8b", "duet"): {"throughput_rps": "2.72 req/s"},
    ("mooncake-8b", "vllm-chunked"): {"throughput_rps": "2.14 req/s"},
    ("azure-code-14b-tp2", "duet"): {"tbt_p99_ms": "2nd lowest (after Dynamo-1P1D)",
                                     "throughput_rps": "highest"},
    ("azure-code-14b-tp2", "dynamo"): {"tbt_p99_ms": "lowest", "throughput_rps": "lowest"},
}

# Relations the paper states, checked on our numbers: (experiment, description, predicate).
OBS3_CLAIMS = (
    "Disagg 1P1D's TTFT climbs steeply after QPS 4",
    "Agg-vLLM (2 replicas) saturates near QPS 7",
    "Disagg 1P1D's total token throughput is below half of Agg-vLLM's (at high QPS)",
    "Disagg 1P1D's TBT stays flat",
)
