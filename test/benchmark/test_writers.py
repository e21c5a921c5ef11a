"""Every result JSON a benchmark writes goes through benchmark.stamp.write_result: a source scan
for other JSON writers, and the writers themselves run on tiny inputs into tmp_path."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmark"
STAMP_KEYS = {"commit", "date", "machine", "command"}
# JSON written by other means on purpose: (file, call) -> why it is not a result.
NOT_RESULTS = {
    ("benchmark/stamp.py", "write_text"): "the one writer",
    ("benchmark/gpu/serving_check.py", "write_text"): "a model config dir for the server",
    ("benchmark/serving/convert.py", "write"): "the request replay file (JSONL input)",
    ("benchmark/latency_model/e2e_fit.py", "write_text"): "the simulator's front-end cost "
    "profile (sim/frontend_costs.json: an input, like a calibration profile)",
    ("benchmark/capacity/search.py", "write"): "the run cache under the output folder's tmp/ "
    "(git-ignored JSON lines, not a result)",
    ("benchmark/gpu/answers.py", "write_text"): "the phases_gpu step's answer, a step file "
    "that collect folds into the stamped stage JSON",
    ("benchmark/gpu/carry/build.py", "write_text"): "the carry's size record (carry_size.json), "
    "an input the tree-size test reads, unstamped so a same-spec rebuild changes nothing",
}


def _json_writes(path: Path) -> list[tuple[str, int]]:
    """(call, line) of each `json.dump(...)` and each `X.write_text(json.dumps(...))` /
    `X.write(json.dumps(...))` in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        if name == "dump" and ast.unparse(node.func.value) == "json":
            found.append((name, node.lineno))
        elif name in ("write_text", "write") and node.args:
            arg = node.args[0]
            while isinstance(arg, ast.BinOp):  # json.dumps(...) + "\n"
                arg = arg.left
            if isinstance(arg, ast.Call) and ast.unparse(arg.func) == "json.dumps":
                found.append((name, node.lineno))
    return sorted(found, key=lambda c: c[1])


def test_scan_finds_the_usual_ways_of_writing_json(tmp_path):
    src = tmp_path / "w.py"
    src.write_text("import json\n"
                   "with open('r.json', 'w') as f:\n    json.dump({}, f)\n"
                   "p.write_text(json.dumps({}, indent=1) + '\\n')\n"
                   "f.write(json.dumps({}))\n"
                   "p.write_text('plain text')\nprint(json.dumps({}))\n")
    assert _json_writes(src) == [("dump", 3), ("write_text", 4), ("write", 5)]


def test_no_benchmark_writes_json_but_through_write_result():
    offenders = []
    for path in sorted(BENCH.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        offenders += [f"{rel}:{line} ({call})" for call, line in _json_writes(path)
                      if (rel, call) not in NOT_RESULTS]
    assert not offenders, ("write result JSON through benchmark.stamp.write_result (or list a "
                           "non-result file in NOT_RESULTS): " + ", ".join(offenders))


def _stamped(path: Path) -> dict:
    body = json.loads(Path(path).read_text())
    assert list(body)[0] == "stamp" and set(body["stamp"]) == STAMP_KEYS, path
    return body


# ---- the writers, on tiny inputs ---------------------------------------------------------------
def test_prediction_cost(tmp_path):
    from benchmark.latency_model import prediction_cost

    out = tmp_path / "pc.json"
    prediction_cost.main(["--calls", "3", "--requests", "16", "--prefills", "2", "--out",
                          str(out)])
    body = _stamped(out)
    assert body["results"]["predict_mixed_batch"]["median_us"] > 0
    assert set(body["env"]) == {"numpy", "loadavg"}  # python, machine, cpus: in the stamp


def test_paper_observations(tmp_path):
    from benchmark.latency_model import paper_observations

    out = tmp_path / "po.json"
    paper_observations.main(["--out", str(out)])
    body = _stamped(out)
    assert len(body["rows"]) == 5 and "calibration" in body


def test_sim_speed_on_a_short_trace(tmp_path):
    from benchmark.sim import speed

    trace = tmp_path / "trace.csv"
    import lzma

    lines = lzma.open(BENCH / "traces" / "azure_conv_2023.csv.xz", "rt").read().splitlines()[:21]
    trace.write_text("\n".join(lines) + "\n")
    out = tmp_path / "speed.json"
    assert speed.main(["--trace", str(trace), "--out", str(out)]) == 0
    body = _stamped(out)
    assert body["metrics"]["completed"] == 20 and "machine" not in body


def test_serving_compare_writes_stamped_json(tmp_path, monkeypatch):
    """compare()'s own writing, with the trace conversion and the servers stubbed out."""
    from benchmark.serving import compare as cmp
    from benchmark.serving.systems import parse_systems

    info = {"requests": 4, "mean_input": 10.0, "mean_output": 5.0}
    summary = {"requests": 4, "completed": 4, "failed": 0, "output_throughput": 12.0,
               "request_throughput": 1.0, "median_ttft_ms": 5.0, "p99_ttft_ms": 9.0,
               "median_itl_ms": 2.0, "p99_itl_ms": 4.0, "max_itl_ms": 5.0,
               "slo_attainment": 1.0}
    monkeypatch.setattr(cmp, "build_requests", lambda cfg, work: {2.0: ("r.jsonl", info)})
    monkeypatch.setattr(cmp, "run_system", lambda cfg, system, files, work, progress: {
        "status": "ran", "reason": None, "command": "x",
        "runs": [{"qps": 2.0, "summary": summary, "conversion": info}]})
    cfg = cmp.Config(trace="azure_conv", qps=[2.0], systems=parse_systems("duet"), model="m",
                     tag="t", out_dir=str(tmp_path / "out"))
    res = cmp.compare(cfg, progress=lambda m: None, work=str(tmp_path / "work"))
    body = _stamped(tmp_path / "out" / "t.json")
    assert body["systems"]["duet"]["runs"][0]["summary"] == summary
    assert "stamp" not in res and (tmp_path / "out" / "t.md").exists()


def test_overhead_side_by_side_writes_stamped_json(tmp_path, monkeypatch):
    """benchmark.overhead's report, with the servers and bench_serving stubbed out."""
    import benchmark.overhead.__main__ as ov

    class FakeServer:
        def __init__(self, args, stock=False, log_path=""):
            self.port, self.args, self.stock = 1, args, stock

        def start(self):
            return self

        def stop(self):
            pass

        def command(self):
            return ["python", "-m", "sglang.launch_server" if self.stock else "duet"]

    tput = iter([100.0, 98.0])
    monkeypatch.setattr(ov, "Server", FakeServer)
    monkeypatch.setattr(ov, "bench", lambda *a, **k: {"completed": 4,
                                                      "output_throughput": next(tput)})
    out = tmp_path / "cpu.json"
    assert ov.main(["--model", "m", "--rounds", "1", "--warmup-prompts", "0",
                    "--out", str(out)]) == 0
    body = _stamped(out)
    assert body["ratio_duet_over_stock"] == pytest.approx(0.98)
    assert "cpu_count" not in body["config"]
