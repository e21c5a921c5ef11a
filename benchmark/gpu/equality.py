"""Stage 2's equality verdict: greedy outputs of a spatial and an aggregated server on the same
prompts, equal or diverging only at a near-tie of the logits.

The GPU check serves `--load-format dummy` weights: SGLang draws each parameter from
U(-1e-3, 1e-3), so the logits are nearly flat and two correct runs whose bf16 GEMMs have
different batch shapes (aggregated: mixed extend batches; spatial: partition decode graphs) can
pick different argmaxes (issue #47, review item 10). So each output token comes with SGLang's
top-2 logprobs, and a prompt whose outputs first differ at position i is a `near_tie` when, on
both servers, the top-2 logprobs at i are within TIE_MARGIN of each other and each server's
runner-up is the other's choice; any other difference is `diverged` and fails the step.
TIE_MARGIN is in nats (a logprob difference is a logit difference): 0.05, several bf16 rounding
steps (relative 2^-8) for logits of order 1-10. After a near-tie the two continuations differ
by construction, so nothing after i is compared.
"""

from __future__ import annotations

TIE_MARGIN = 0.05  # nats


def top2(entry) -> tuple[tuple[float, int], tuple[float, int]] | None:
    """((logprob, id) of the best, (logprob, id) of the runner-up) from one position's
    SGLang top-logprobs list ([[logprob, id, text], ...]); None when fewer than two."""
    if not entry or len(entry) < 2:
        return None
    (a, ia, *_), (b, ib, *_) = entry[0], entry[1]
    return (float(a), int(ia)), (float(b), int(ib))


def classify(a: list[int], b: list[int], top_a: list, top_b: list,
             margin: float = TIE_MARGIN) -> dict:
    """One prompt: `equal`, `near_tie` or `diverged`, with the first differing position and the
    margins seen there."""
    if a == b:
        return {"verdict": "equal"}
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    if i >= min(len(a), len(b)):
        return {"verdict": "diverged", "position": i, "why": "lengths differ"}
    ta = top2(top_a[i]) if i < len(top_a) else None
    tb = top2(top_b[i]) if i < len(top_b) else None
    if ta is None or tb is None:
        return {"verdict": "diverged", "position": i, "why": "no top-2 logprobs there"}
    gap_a, gap_b = ta[0][0] - ta[1][0], tb[0][0] - tb[1][0]
    swapped = ta[0][1] == b[i] or ta[1][1] == b[i]
    swapped = swapped and (tb[0][1] == a[i] or tb[1][1] == a[i])
    near = swapped and max(gap_a, gap_b) <= margin
    return {"verdict": "near_tie" if near else "diverged", "position": i,
            "margins": [round(gap_a, 5), round(gap_b, 5)], "runner_up_swapped": swapped}


def compare_with_margin(a: list[list[int]], b: list[list[int]], top_a: list[list],
                        top_b: list[list], margin: float = TIE_MARGIN) -> dict:
    """Every prompt classified; `ok` when none diverged (near-ties allowed and counted)."""
    rows = [classify(x, y, tx, ty, margin)
            for x, y, tx, ty in zip(a, b, top_a, top_b, strict=False)]
    count = {v: sum(r["verdict"] == v for r in rows) for v in ("equal", "near_tie", "diverged")}
    return {"prompts": len(a), **count, "tie_margin_nats": margin,
            "differences": [dict(r, prompt=k) for k, r in enumerate(rows)
                            if r["verdict"] != "equal"],
            "ok": len(a) == len(b) and count["diverged"] == 0}
