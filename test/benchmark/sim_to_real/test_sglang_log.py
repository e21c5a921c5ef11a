"""SGLang's per-batch log lines -> the schedule a server ran, and its comparison table."""

from __future__ import annotations

from datetime import datetime

from benchmark.sim_to_real import report
from benchmark.sim_to_real.sglang_log import parse_iterations, schedule_stats, window_stats

LOG = """\
[2026-12-01 22:17:12] Prefill batch, #new-seq: 1, #new-token: 137, #cached-token: 0, \
token usage: 0.79, #running-req: 15, #queue-req: 7, #pending-token: 937, cpu graph: False, \
input throughput (token/s): 92.39
[2026-12-01 22:17:12] some other line
[2026-12-01 22:17:14] Prefill batch, #new-seq: 2, #new-token: 585, #cached-token: 0, \
token usage: 0.93, #running-req: 0, #queue-req: 5, #pending-token: 352, cpu graph: False, \
input throughput (token/s): 240.42
[2026-12-01 22:17:21] Decode batch, #running-req: 5, #token: 585, token usage: 0.29, \
cpu graph: False, gen throughput (token/s): 38.05, #queue-req: 0
[2026-12-01 22:19:00] Decode batch, #running-req: 9, #token: 585, token usage: 0.29, \
cpu graph: False, gen throughput (token/s): 38.05, #queue-req: 2
"""


def t(hms: str) -> float:
    return datetime.strptime(f"2026-12-01 {hms}", "%Y-%m-%d %H:%M:%S").timestamp()


def test_lines_become_iterations():
    its = parse_iterations(LOG)
    assert [(k, r, tok, q) for _, k, r, tok, q in its] == [
        ("extend", 15, 137, 7), ("extend", 0, 585, 5), ("decode", 5, 0, 0), ("decode", 9, 0, 2)]
    assert its[0][0] == t("22:17:12")


def test_mixed_or_prefill_only_and_the_window():
    mixed = window_stats(LOG, (t("22:17:12"), t("22:17:21")), mixed=True)
    assert (mixed["mixed_iterations"], mixed["prefill_only_iterations"],
            mixed["decode_only_iterations"]) == (1, 1, 1)  # the 22:19 line is outside
    assert mixed["decode_rows_mean"] == 10.0 and mixed["decode_rows_max"] == 15
    assert mixed["prefill_tokens_total"] == 722 and mixed["prefill_tokens_mean"] == 361.0
    default = window_stats(LOG, (t("22:17:12"), t("22:17:21")), mixed=False)
    assert default["mixed_iterations"] == 0 and default["prefill_only_iterations"] == 2
    assert default["decode_rows_mean"] == 5.0  # waiting decodes are not in the batch
    assert schedule_stats([], True)["decode_rows_mean"] is None


def test_schedule_comparison_rows_and_table():
    real = [{"qps": 1.0, "schedule": schedule_stats([("decode", 3, 0)], True),
             "busy_s": {"decode_only": 1.0, "mixed": 2.0, "prefill_only": 0.0}}]
    sim = {1.0: {"schedule": schedule_stats([("decode", 4, 0), ("decode", 2, 0)], True),
                 "busy_s": {"decode_only": 1.5, "mixed": 2.5, "prefill_only": 0.0}}}
    (row,) = report.compare_schedules(real, sim)
    assert row["decode_only_iterations"] == (1, 2) and row["decode_rows_mean"] == (3.0, 3.0)
    assert row["busy_s"]["mixed"] == (2.0, 2.5)
    md = report.schedule_table([row])
    assert "| 1 | 1 / 2 | 0 / 0 |" in md and "1 / 1.5, 2 / 2.5, 0 / 0" in md


def test_periods_of_consecutive_lines_of_one_kind_become_samples():
    from benchmark.sim_to_real.sglang_log import log_samples

    log = LOG + (
        "[2026-12-01 22:19:01] Decode batch, #running-req: 8, #token: 800, token usage: 0.4, "
        "cpu graph: False, gen throughput (token/s): 80.00, #queue-req: 0\n"
        "[2026-12-01 22:19:02] Prefill batch, #new-seq: 2, #new-token: 101, #cached-token: 0, "
        "token usage: 0.5, #running-req: 8, #queue-req: 0, #pending-token: 0, cpu graph: False, "
        "input throughput (token/s): 1000.00\n")
    mixed = log_samples(log, "h100-sxm", "qwen3-8b", mixed=True)
    # prefill->prefill (22:17:14) and decode->decode (22:19:00 and 22:19:01) only
    assert [round(s.seconds, 4) for s in mixed] == [round(585 / 240.42, 4),
                                                  round(9 / 38.05, 4), 0.1]
    b = mixed[0].batch
    assert b.q.tolist() == [293, 292] and b.c.tolist() == [0, 0]  # 2 chunks, no decodes
    assert mixed[2].batch.q.tolist() == [1] * 8 and mixed[2].batch.c.tolist() == [100] * 8
    later = log_samples(log, "h100-sxm", "qwen3-8b", mixed=True,
                        window=(t("22:19:00"), t("22:19:02")))
    assert len(later) == 2


def test_the_overlap_loop_logs_a_batch_when_the_next_one_ends():
    """event_loop_overlap: line N is written after batch N+1 ran, so the gap it reports is
    N+1's period; a last line before an idle loop reports only processing time."""
    from benchmark.sim_to_real.sglang_log import log_samples

    d = ("[2026-12-01 22:19:0{s}] Decode batch, #running-req: {b}, #token: {tok}, token "
         "usage: 0.1, cpu graph: False, gen throughput (token/s): {rate}, #queue-req: 0\n")
    log = (d.format(s=0, b=2, tok=200, rate=20.0) + d.format(s=1, b=2, tok=202, rate=40.0)
           + d.format(s=2, b=4, tok=400, rate=80.0) + d.format(s=3, b=4, tok=404, rate=4000.0))
    sync = log_samples(log, "h100-sxm", "qwen3-8b", mixed=True)
    assert [(s.batch.n, round(s.seconds, 4)) for s in sync] == [(2, 0.05), (4, 0.05)]
    ov = log_samples(log, "h100-sxm", "qwen3-8b", mixed=True, overlap=True)
    # line 2's gap (2/40 s) is line 3's batch of 4; line 3's goes with line 4's batch; line
    # 4's (1 ms: processing only) has no next batch
    assert [(s.batch.n, round(s.seconds, 4)) for s in ov] == [(4, 0.05), (4, 0.05)]
