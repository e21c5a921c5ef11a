"""Stage 2's look-ahead delivery check: do a spatial iteration's tokens reach a client one step
at a time, as the policy's gap bound and the simulator assume?

A spatial iteration runs k decode steps (t_d each) beside one prefill. The runtime processes,
and so streams, step j once its event on the decode stream has fired (`runtime/lookahead.py`);
before that fix it processed all k after joining the whole stream, and a client got k tokens
within a millisecond every k * t_d. The equality step streams its prompts (`stream_generate`)
and this module turns the arrival times into one number: the share of tokens that came
*bunched*, in a chunk of several tokens or less than ``BUNCH`` x the median predicted spatial
step (at least ``BUNCH_FLOOR_S``) after the one before. Per-step delivery leaves it near 0;
k-at-a-time delivery makes it about ``expected_if_bunched``, the share of decode tokens that
the plan log's spatial iterations produced after their first step. Without CUDA streams (the
CPU) tokens leave at the iteration's end by design (docs/architecture.md), so there the
figures are reported and not judged; the aggregated server is the control (one step per
iteration: nothing to bunch). Times are seconds.
"""

from __future__ import annotations

import json
import time
import urllib.request
from statistics import median

BUNCH = 0.25  # a gap under this share of the median spatial step counts as bunched
BUNCH_FLOOR_S = 1e-3  # ... or under this: the host's own time to hand one step's tokens on
MIN_EXPECTED = 0.1  # below this share of look-ahead tokens the check cannot tell the two apart
MAX_SHARE = 0.5  # per-step delivery: at most this share of what k-at-a-time would give


def stream_generate(url: str, input_ids: list[int], max_new_tokens: int,
                    timeout: float = 300.0, top_logprobs: int = 0, extra: dict | None = None
                    ) -> tuple[list[int], list[tuple[float, int]]]:
    """Greedy ``/generate`` with ``stream: true``: the output ids and, per streamed chunk that
    brought tokens, (arrival time from `time.perf_counter`, new tokens). Chunks carry SGLang's
    cumulative ids (or, with ``--incremental-streaming-output``, the new ones). RuntimeError on
    a streamed error or abort (SGLang sends those inside the 200 stream). With `top_logprobs`
    > 0, ``extra["top_logprobs"]`` gets per output token SGLang's top-n ``[logprob, token id,
    text]`` entries (the equality step's logit margin)."""
    body = {"input_ids": input_ids, "stream": True,
            "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0.0,
                                "ignore_eos": True}}
    if top_logprobs:
        body.update(return_logprob=True, top_logprobs_num=top_logprobs)
    top: list = []
    req = urllib.request.Request(url + "/generate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    ids: list[int] = []
    arrivals: list[tuple[float, int]] = []
    seen = 0
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        for raw in resp:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            msg = json.loads(data)
            now = time.perf_counter()
            if "error" in msg:  # a refused or failed request still answers 200 when streamed
                raise RuntimeError(f"/generate stream: {msg['error']}")
            reason = msg["meta_info"].get("finish_reason")
            if isinstance(reason, dict) and reason.get("type") == "abort":
                raise RuntimeError(f"/generate stream aborted: {reason}")
            n = int(msg["meta_info"]["completion_tokens"])
            out = msg.get("output_ids") or []
            ids = list(out) if len(out) == n else ids + list(out)
            got = msg["meta_info"].get("output_top_logprobs") or []
            top = list(got) if len(got) == n else top + list(got)
            if n > seen:
                arrivals.append((now, n - seen))
                seen = n
    if extra is not None and top_logprobs:
        extra["top_logprobs"] = top
    return ids, arrivals


def expected_if_bunched(plan_rows: list[dict]) -> float:
    """Share of the logged decode tokens (sent ones: a spatial row's ``discarded`` surplus is
    left out) that spatial iterations produced after their first step: what arrives bunched if
    each iteration's tokens leave together."""
    later = total = 0
    for r in plan_rows:
        n_d = len(r.get("decode_rids") or ())
        if r.get("mode") == "spatial":  # the steps it ran (0: its decodes had all finished),
            steps = int(r.get("decode_steps") or 0)  # less the surplus tokens never sent
            made = max(n_d * steps - int(r.get("discarded") or 0), 0)
            later += max(made - n_d, 0) if steps else 0
        else:  # aggregated and decode-only plans run one step (they log decode_steps 0)
            made = n_d
        total += made
    return later / total if total else 0.0


def delivery_summary(streams: list[list[tuple[float, int]]], plan_rows: list[dict],
                     judged: bool) -> dict:
    """The bunched share of every token after each stream's first, the client gaps, the plan
    log's spatial steps and, when ``judged`` (CUDA streams), whether delivery was per step."""
    spatial = [r for r in plan_rows if r.get("mode") == "spatial"]
    step = median(r["predicted_decode_s"] for r in spatial) if spatial else None
    limit = max(BUNCH * step, BUNCH_FLOOR_S) if step is not None else 0.0
    gaps, tokens, bunched = [], 0, 0
    for s in streams:
        for (t0, _), (t1, n) in zip(s, s[1:], strict=False):
            gaps.append(t1 - t0)
            tokens += n
            bunched += n - 1 + (step is not None and t1 - t0 < limit)
    share = bunched / tokens if tokens else None
    expected = expected_if_bunched(plan_rows)
    out = {
        "tokens_after_first": tokens,
        "bunched_share": None if share is None else round(share, 4),
        "expected_if_bunched": round(expected, 4),
        "client_gap_p50_ms": round(median(gaps) * 1e3, 3) if gaps else None,
        "spatial_iterations": len(spatial),
        "spatial_step_pred_ms_median": None if step is None else round(step * 1e3, 3),
        "lookahead_median": median(r["lookahead"] for r in spatial) if spatial else None,
        "ok": None,
    }
    if judged and share is not None and expected >= MIN_EXPECTED:
        out["ok"] = share <= MAX_SHARE * expected
    elif judged:
        out["note"] = (f"look-ahead tokens are {expected:.0%} of the decode tokens (< "
                       f"{MIN_EXPECTED:.0%}): too few to tell per-step from bunched delivery")
    else:
        out["note"] = "no CUDA streams: tokens leave at the iteration's end (not judged)"
    return out
