"""`python -m benchmark.gpu.concurrent_check` on a CPU: shapes, predictions, report, exit 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.gpu import concurrent_check as cc
from benchmark.gpu import concurrent_model as cm
from sglang_duet.latency import Calibration, LatencyModel, get_hardware, get_model

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def lms():
    full = get_model("qwen3-8b")
    hw = get_hardware("h200")
    cal = Calibration().without_host()  # kernels timed on streams: no serving loop
    return LatencyModel(hw, cm.reduced_model(full, 4), cal), LatencyModel(hw, full, cal)


@pytest.fixture(scope="module")
def batches():
    return cm.workload_batches(64, 4096, 8192)


def _no_cuda() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device exists")


# ---- exit status without a GPU ----------------------------------------------------------------
def test_main_exits_2_without_cuda(capsys, tmp_path):
    _no_cuda()
    assert cc.main(["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "needs a CUDA device" in err and "--dry-run" in err
    assert not list(tmp_path.iterdir())


def test_module_exits_2_without_traceback(tmp_path):
    """As check.sh runs it: `python -m`, with PYTHONPATH=<repo>/python:<repo> (no install)."""
    _no_cuda()
    env = {**os.environ, "OUT": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "python"), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "benchmark.gpu.concurrent_check"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "needs a CUDA device" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not list(tmp_path.iterdir())


def test_why_not_here_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert cc.why_not_here() == "PyTorch is not installed"


# ---- shapes -----------------------------------------------------------------------------------
def test_reduced_model_keeps_shapes_and_scales_layer_time(lms, batches):
    lm, lm_full = lms
    small, full = lm.model, lm_full.model
    assert small.num_layers == 4 and full.num_layers == 36
    assert (small.hidden, small.head_dim, small.vocab) == (full.hidden, full.head_dim, full.vocab)
    assert small.kv_bytes_per_token * 9 == full.kv_bytes_per_token
    for b in batches:
        p, pf = lm.predict(b, 64), lm_full.predict(b, 64)
        assert pf.token_ops_s == pytest.approx(9 * p.token_ops_s)
        assert pf.attention_s == pytest.approx(9 * p.attention_s)
        assert pf.lm_head_s == pytest.approx(p.lm_head_s)
    for bad in (0, 37):
        with pytest.raises(ValueError):
            cm.reduced_model(full, bad)


def test_workload_batches(batches):
    decode, prefill = batches
    assert decode.n == 64 and decode.tokens == 64 and set(decode.c.tolist()) == {4096}
    assert prefill.n == 1 and prefill.tokens == 8192 and prefill.c.tolist() == [0]
    with pytest.raises(ValueError):
        cm.workload_batches(0, 4096, 8192)


def test_pick_sizes():
    menu = list(range(16, 113, 8))
    assert cm.pick_sizes(menu, 132, [0.25, 0.5, 0.75]) == [32, 64, 96]
    assert cm.pick_sizes(menu, 132, [0.5, 0.5, 0.01]) == [16, 64]  # repeats merged, clipped
    assert cm.pick_sizes([16, 24], 40, [0.5]) == [16]  # tie at 20: the smaller
    assert cm.pick_sizes([], 132, [0.5]) == []
    with pytest.raises(ValueError):
        cm.pick_sizes(menu, 132, [1.0])


def test_choose_sizes_explicit_and_unknown():
    args = cc.CheckArgs(sizes="64,32,64")
    assert cc.choose_sizes(args, (16, 32, 64), 132) == [32, 64]
    with pytest.raises(SystemExit, match="not in the menu"):
        cc.choose_sizes(cc.CheckArgs(sizes="20"), (16, 32), 132)


def test_hardware_for_and_parse_list():
    assert cm.hardware_for("NVIDIA H200") == ("h200", "")
    assert cm.hardware_for("NVIDIA H100 80GB HBM3")[0] == "h100-sxm"
    name, note = cm.hardware_for("NVIDIA L4")
    assert name == "h100-sxm" and "unknown GPU" in note  # the GPU most often lent
    assert cm.parse_list("0.25, 0.5,") == [0.25, 0.5]
    assert cm.parse_list("8,16", int) == [8, 16]


# ---- statistics and predictions ----------------------------------------------------------------
def test_median_and_rel_error():
    assert cm.median_s([3.0, 1.0, 2.0, 100.0]) == 2.5
    assert cm.median_s([]) is None
    assert cm.rel_error(1.1, 1.0) == pytest.approx(0.1)
    assert cm.rel_error(0.9, 1.0) == pytest.approx(-0.1)
    assert cm.rel_error(None, 1.0) is None and cm.rel_error(1.0, 0.0) is None


def test_predictions_split_and_whole(lms, batches):
    lm, _ = lms
    d, p = batches
    pred = cm.predictions(lm, d, p, 32, 100)
    want_d, want_p = lm.predict_concurrent(d, p, 32, 100)
    assert pred["decode_concurrent"] == want_d.total_s
    assert pred["prefill_concurrent"] == want_p.total_s
    assert pred["decode_alone"] == lm.predict(d, 32).total_s
    assert pred["prefill_alone"] == lm.predict(p, 100).total_s
    assert pred["decode_concurrent"] >= pred["decode_alone"]
    whole = cm.predictions(lm, d, p, None, None)
    assert whole["decode_alone"] == lm.predict(d).total_s
    assert whole["decode_concurrent"] is None and whole["prefill_concurrent"] is None
    # a device with more SMs than the spec: the prefill side is clipped, not refused
    clipped = cm.predictions(lm, d, p, 32, 140)
    assert clipped["prefill_alone"] == lm.predict(p, 100).total_s


def test_compare_reports_error_slowdown_and_full_model_estimate(lms, batches):
    lm, lm_full = lms
    d, p = batches
    (m,) = cm.fake_measurements(lm, d, p, [(32, 100)], repeats=5, bias=1.25)
    pred = cm.predictions(lm, d, p, 32, 100)
    full = cm.predictions(lm_full, d, p, 32, 100)
    row = cm.compare(m, pred, full)
    assert row["concurrent"] and row["sms_decode"] == 32 and row["sms_prefill"] == 100
    for phase in cm.PHASES:
        c = row[phase]
        assert c["meas_ms"] == pytest.approx(1.25 * pred[phase] * 1e3)
        assert c["rel_err"] == pytest.approx(1 / 1.25 - 1)
        assert len(c["samples_ms"]) == 5
        assert c["meas_full_model_est_ms"] == pytest.approx(1.25 * full[phase] * 1e3)
    ratio = pred["decode_concurrent"] / pred["decode_alone"]
    assert row["decode_slowdown"]["pred"] == pytest.approx(ratio)
    assert row["decode_slowdown"]["meas"] == pytest.approx(ratio)
    assert row["start_skew_ms"] == 0.0


def test_compare_with_a_contended_measurement(lms, batches):
    lm, lm_full = lms
    d, p = batches
    m = cm.Measured(32, 100, decode_alone=[0.002, 0.002, 0.003],
                    decode_concurrent=[0.003, 0.003], prefill_alone=[0.03],
                    prefill_concurrent=[0.033])
    row = cm.compare(m, cm.predictions(lm, d, p, 32, 100), cm.predictions(lm_full, d, p, 32, 100))
    assert row["decode_slowdown"]["meas"] == pytest.approx(1.5)
    assert row["prefill_slowdown"]["meas"] == pytest.approx(1.1)
    assert row["start_skew_ms"] is None


def test_summarize_skips_missing_phases():
    rows = [{ph: {"rel_err": e} for ph, e in zip(cm.PHASES, (0.1, -0.3, None, None),
                                                   strict=True)},
            {ph: {"rel_err": e} for ph, e in zip(cm.PHASES, (0.2, 0.1, -0.05, None),
                                                   strict=True)}]
    s = cm.summarize(rows)
    assert s["decode_alone"]["median_abs_rel_err"] == pytest.approx(0.15)
    assert s["decode_concurrent"]["n"] == 1
    assert s["prefill_concurrent"] == {"n": 0, "median_abs_rel_err": None,
                                       "max_abs_rel_err": None}
    assert s["all"]["n"] == 5 and s["all"]["max_abs_rel_err"] == pytest.approx(0.3)


# ---- report -----------------------------------------------------------------------------------
def test_sequential_report_is_marked_and_has_no_concurrent_rows(lms, batches):
    lm, lm_full = lms
    d, p = batches
    (m,) = cm.fake_measurements(lm, d, p, [(None, None)], repeats=3)
    setup = {"mode": "sequential-whole-device", "timing": "cuda events per stream",
             "partition": {"fallback_reason": "no partitions (auto -> none)"}}
    report = cm.build_report(setup, {}, lm, lm_full, d, p, [m])
    json.dumps(report)  # serialisable
    (row,) = report["rows"]
    assert row["sms_decode"] is None and not row["concurrent"]
    assert row["decode_concurrent"]["meas_ms"] is None
    assert row["decode_slowdown"] == {"pred": None, "meas": None}
    assert report["summary"]["all"]["n"] == 2
    table = cm.format_table(report)
    assert "sequential-whole-device" in table and "whole" in table
    assert "decode_concurrent" not in table and "decode slowdown" not in table


def test_dry_run_writes_json_under_out_env(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OUT", str(tmp_path))
    assert cc.main(["--dry-run", "--repeats", "3"]) == 0
    report = json.loads((tmp_path / cc.RESULT_FILE).read_text())
    assert report["mode"] == "dry-run" and "date" not in report
    assert set(report["stamp"]) == {"commit", "date", "machine", "command"}
    assert [r["sms_decode"] for r in report["rows"]] == [32, 64, 96]
    assert [r["sms_prefill"] for r in report["rows"]] == [100, 68, 36]
    assert report["model"] == {"name": "qwen3-8b", "layers_run": 4, "layers_full": 36,
                               "hardware": "h100-sxm",  # the GPU most often lent
                               "calibration": "default (uncalibrated)"}
    assert report["workload"]["decode"] == {"requests": 64, "context": 4096}
    assert report["workload"]["prefill"] == {"tokens": 8192, "context": 0}
    assert report["summary"]["all"]["n"] == 12
    assert report["config"]["layers"] == 4
    out = capsys.readouterr().out
    assert "decode slowdown" in out and "32/100" in out


def test_cli_flags_round_trip():
    ns = cc.CheckArgs.parser().parse_args(["--layers", "2", "--no-cuda-graph", "--sizes", "8"])
    args = cc.CheckArgs(**vars(ns))
    assert args.layers == 2 and args.cuda_graph is False and args.sizes == "8"
    assert args.prefill_tokens == 8192 and args.backend == "green-ctx"


def test_menu_falls_back_without_partitions():
    _no_cuda()
    from benchmark.gpu import concurrent_torch as ct

    menu, reason, fallback = ct._menu("green-ctx", 0)
    assert fallback is not None and "sequentially on the whole device" in fallback
    assert menu is None or menu.backend == "none"
    assert reason


def test_failed_split_is_reported_and_fails_the_run(lms, batches, tmp_path, monkeypatch):
    lm, lm_full = lms
    d, p = batches
    (ok,) = cm.fake_measurements(lm, d, p, [(32, 100)], repeats=3)
    bad = cm.Measured(64, 68, error="RuntimeError: boom")
    report = cm.build_report({"mode": "partitioned"}, {}, lm, lm_full, d, p, [ok, bad])
    assert report["rows"][1]["error"] == "RuntimeError: boom"
    assert report["rows"][1]["decode_alone"]["meas_ms"] is None
    assert report["summary"]["all"]["n"] == 4
    assert "64/68 | FAILED: RuntimeError: boom" in cm.format_table(report)

    def fake_dry_run(args, lm, decode, prefill):
        return {"mode": "dry-run"}, [ok, bad]

    monkeypatch.setattr(cc, "dry_run_measurements", fake_dry_run)
    assert cc.main(["--dry-run", "--out", str(tmp_path)]) == 1
    assert (tmp_path / cc.RESULT_FILE).exists()


def test_strict_fails_when_no_partition_ran(capsys):
    """check.sh runs --strict: a fall back to the whole device means nothing ran on a split's
    remainder group, which is the question the step answers."""
    row = {"sms_decode": None, "error": None}
    whole = {"mode": "sequential-whole-device", "rows": [row],
             "partition": {"fallback_reason": "green-ctx: driver too old"}}
    assert cc.verdict(whole, strict=False) == 0
    assert cc.verdict(whole, strict=True) == 1
    assert "driver too old" in capsys.readouterr().err
    split = {"mode": "partitioned", "rows": [{"sms_decode": 32, "error": None}]}
    assert cc.verdict(split, strict=True) == 0
    split["rows"].append({"sms_decode": 64, "error": "CUDA error: launch failure"})
    assert cc.verdict(split, strict=True) == 1
    assert "launch failure" in capsys.readouterr().err


def test_clock_and_split_with_fake_streams(monkeypatch):
    """The GPU-side control flow (events, gate, host fallback) with stand-ins for CUDA."""
    import contextlib

    torch = pytest.importorskip("torch")
    from benchmark.gpu import concurrent_torch as ct

    class Stream:
        def synchronize(self):
            pass

        def query(self):
            return True

        def wait_event(self, event):
            log.append("wait")

    class Event:
        count = 0

        def __init__(self, enable_timing=False):
            Event.count += 1
            self.t = Event.count

        def record(self, stream=None):
            pass

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return float(other.t - self.t)

    log: list[str] = []
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: log.append("gate"))
    ds, ps = Stream(), Stream()
    clock = ct.Clock(warmup=1, repeats=3, gate_cycles=100)
    clock.probe(ds)
    assert clock.events
    m = ct._split(clock, False, lambda: log.append("d"), lambda: log.append("p"), ds, ps, 32, 100)
    assert (m.sms_decode, m.sms_prefill) == (32, 100)
    assert len(m.decode_alone) == len(m.prefill_concurrent) == len(m.start_skew) == 3
    assert m.notes == ["decode: eager", "prefill: eager"]
    pair = log[log.index("gate"):]
    assert pair[:4] == ["gate", "wait", "d", "p"]  # gate, then decode before prefill
    clock.events = False
    seq = ct._sequential(clock, False, lambda: None, lambda: None, ds)
    assert seq.sms_decode is None and not seq.decode_concurrent and len(seq.decode_alone) == 3
    d, p, skew = clock.pair(lambda: None, ds, lambda: None, ps)
    assert len(d) == len(p) == 3 and skew == []


# ---- check.sh ---------------------------------------------------------------------------------
def test_check_sh_runs_it_and_parses():
    sh = ROOT / "benchmark/gpu/check.sh"
    text = sh.read_text()
    assert "-m benchmark.gpu.concurrent_check" in text
    assert subprocess.run(["bash", "-n", str(sh)], capture_output=True).returncode == 0
    if shutil.which("shellcheck"):
        proc = subprocess.run(["shellcheck", str(sh)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout
