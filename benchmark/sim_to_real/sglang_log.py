"""The iterations a server ran, from SGLang's own scheduler log (every server here runs with
`--decode-log-interval 1`), reduced to the schedule statistics the simulator is compared on.

SGLang 0.5.17 logs one line per processed batch (`managers/scheduler_components/
metrics_reporter.py`: `report_prefill_stats`, `report_decode_stats`, both called from
`batch_result_processor.py` once the batch's result is processed): ``Prefill batch, #new-seq:
S, #new-token: T, ..., #running-req: R, #queue-req: Q`` for an extend batch and ``Decode batch,
#running-req: B, ...`` for a decode batch. With mixed chunked prefill (`--enable-mixed-chunk`,
and the duet loop's aggregated plans) R running decodes ride in the extend batch
(`PrefillAdder(..., num_mixed_decode_tokens=running_bs)`), so such a line is a mixed iteration
when R > 0; without it the extend batch is prefill-only and R requests wait.

Lines carry whole-second timestamps; a load point's lines are those within its bench run's
wall-clock window (one second of slack on each side).

Loop periods (`log_samples`): each line's throughput figure is its tokens over the time since
the previous line *of the same kind* (`gap_latency`), so where two lines of one kind follow
each other that time is one loop period: the line's own batch's in a synchronous loop, the
next batch's in SGLang's overlap loop (see `log_samples`). The batch is rebuilt from its line
(prefill rows: #new-seq chunks of equal length with nothing cached; decode rows: the running
requests, each with the mean context ``#token / B`` of the nearest decode line). These are the
calibration samples of the stock servers, which have no plan log.
"""

from __future__ import annotations

import re
from datetime import datetime

import numpy as np

_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]")
_PREFILL = re.compile(r"Prefill batch.*?#new-seq: (\d+), #new-token: (\d+).*?#running-req: (\d+)"
                      r".*?#queue-req: (\d+)")
_DECODE = re.compile(r"Decode batch.*?#running-req: (\d+).*?#queue-req: (\d+)")
_TOKENS = re.compile(r"#token: (\d+)")
_RATE = re.compile(r"(?:input|gen) throughput \(token/s\): ([\d.]+)")
MAX_PERIOD_S = 5.0  # a longer implied period means the loop waited: not a sample
MIN_PERIOD_S = 0.002  # no forward of a real batch is this short: processing only


def parse_iterations(text: str) -> list[tuple[float, str, int, int, int]]:
    """(time s, "extend" | "decode", decode rows R or B, prefill tokens, queued) per line."""
    out = []
    for line in text.splitlines():
        m = _STAMP.match(line)
        if not m:
            continue
        t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
        if p := _PREFILL.search(line):
            out.append((t, "extend", int(p.group(3)), int(p.group(2)), int(p.group(4))))
        elif d := _DECODE.search(line):
            out.append((t, "decode", int(d.group(1)), 0, int(d.group(2))))
    return out


def schedule_stats(iterations: list[tuple[str, int, int]], mixed: bool) -> dict:
    """Counts and sizes of a point's iterations, each given as (kind, decode rows, prefill
    tokens); `mixed`: whether extend iterations carry the running decodes."""
    kinds = {"decode_only": [], "mixed": [], "prefill_only": []}
    for kind, rows, tokens in iterations:
        if kind == "decode":
            kinds["decode_only"].append((rows, 0))
        elif mixed and rows:
            kinds["mixed"].append((rows, tokens))
        else:
            kinds["prefill_only"].append((0, tokens))
    out: dict = {f"{k}_iterations": len(v) for k, v in kinds.items()}
    dec = [r for r, _ in kinds["decode_only"] + kinds["mixed"]]
    ext = [t for _, t in kinds["mixed"] + kinds["prefill_only"]]
    out["decode_rows_mean"] = round(float(np.mean(dec)), 2) if dec else None
    out["decode_rows_max"] = max(dec) if dec else None
    out["prefill_tokens_mean"] = round(float(np.mean(ext)), 1) if ext else None
    out["prefill_tokens_total"] = int(sum(ext))
    return out


def window_stats(text: str, window: tuple[float, float], mixed: bool) -> dict:
    t0, t1 = window
    its = [(k, r, tok) for t, k, r, tok, _ in parse_iterations(text) if t0 - 1 <= t <= t1 + 1]
    return schedule_stats(its, mixed)


def _batches(text: str, mixed: bool) -> list[tuple[float, str, list, list, int, float]]:
    """Per batch line: (time, kind, q rows, c rows, tokens it counts, throughput)."""
    out, ctx = [], 0
    for line in text.splitlines():
        m = _STAMP.match(line)
        p, d = _PREFILL.search(line), _DECODE.search(line)
        if not m or not (p or d):
            continue
        t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
        rate = _RATE.search(line)
        if d:
            b = int(d.group(1))
            tok = _TOKENS.search(line)
            ctx = int(tok.group(1)) // max(1, b) if tok else ctx
            q, c, tokens = [1] * b, [ctx] * b, b
        else:
            seqs, tokens, rows = int(p.group(1)), int(p.group(2)), int(p.group(3))
            each = [tokens // seqs + (i < tokens % seqs) for i in range(seqs)] if seqs else []
            dec = rows if mixed else 0
            q, c = [1] * dec + each, [ctx] * dec + [0] * len(each)
        out.append((t, "decode" if d else "extend", q, c, tokens,
                    float(rate.group(1)) if rate else 0.0))
    return out


def log_samples(text: str, hardware: str, model: str, mixed: bool, overlap: bool = False,
                window: tuple[float, float] | None = None) -> list:
    """Calibration samples (`calibrate.samples.Sample`) of the periods SGLang's log implies,
    optionally only of lines inside `window`. `overlap`: the server ran SGLang's overlap loop
    (`Scheduler.event_loop_overlap`), which processes -- and logs -- batch N after launching
    N+1, so line N is written when N+1 ends and its gap since line N-1 is N+1's period: the
    period then goes with the next line's batch (a last line before an idle loop, whose gap
    is only the processing, falls under `MIN_PERIOD_S`)."""
    from sglang_duet.calibrate.samples import Sample
    from sglang_duet.latency import Batch

    lines = _batches(text, mixed)
    out = []
    for k in range(1, len(lines)):
        t, kind, _, _, tokens, rate = lines[k]
        target = k + 1 if overlap else k
        if lines[k - 1][1] != kind or rate <= 0 or target >= len(lines):
            continue
        if window is not None and not window[0] - 1 <= t <= window[1] + 1:
            continue
        q, c = lines[target][2], lines[target][3]
        sec = tokens / rate
        if q and MIN_PERIOD_S <= sec <= MAX_PERIOD_S:
            out.append(Sample(hardware, model, 1, None, Batch(q, c), sec))
    return out
