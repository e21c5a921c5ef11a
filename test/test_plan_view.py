"""plan_view draws a plan log as a timeline, and says clearly (exit 2) what it cannot draw."""

from __future__ import annotations

import json
import sys

import pytest

from sglang_duet import plan_view
from sglang_duet.policy import BatchPlan, PrefillChunk
from sglang_duet.policy.plan import plan_log_line

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _lines() -> list[dict]:
    """Four iterations through the serialiser the runtime and the simulator use, one idle."""
    chunk = (PrefillChunk("b", 0, 512),)
    plans = [BatchPlan.aggregated(("a",), chunk, 132, 0.09),
             BatchPlan.spatial(("a",), chunk, 16, 116, 4, 0.02, 0.08),
             BatchPlan.decode_only(("a", "b"), 132, 0.01),
             BatchPlan.idle()]
    out, t = [], 0.0
    for i, p in enumerate(plans):
        t += p.predicted_total_s * 1.1
        out.append(plan_log_line(p, p.predicted_total_s * 1.1, 4 if i == 1 else 0, "",
                                 end_s=t, waiting=3 - i))
    return out


def _write(tmp_path, lines, name="plan.tp0.dp0"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_draws_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = _write(tmp_path, _lines())
    assert plan_view.main([str(path)]) == 0
    out = tmp_path / "plan.tp0.dp0.png"
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert "3 iterations" in capsys.readouterr().out  # the idle line is not drawn
    rows = plan_view.read(path)
    assert [r["mode"] for r in rows] == ["aggregated", "spatial", "decode_only"]
    assert plan_view._times(rows)[0] == 0.0
    assert plan_view._times(rows)[1] == pytest.approx(0.09 * 1.1)


def test_window_and_output_name(tmp_path):
    pytest.importorskip("matplotlib")
    path = _write(tmp_path, _lines())
    assert plan_view.main([str(path), "-o", str(tmp_path / "w.png"), "--window", "0:0.05"]) == 0
    assert plan_view.draw(plan_view.read(path), tmp_path / "x.png", window=(0.0, 0.05)) == 1
    with pytest.raises(plan_view.PlanLogError, match="no iteration in the window"):
        plan_view.draw(plan_view.read(path), tmp_path / "y.png", window=(5.0, 6.0))


@pytest.mark.parametrize("content, message", [
    ("{not json\n", "line 1: not JSON"),
    ('{"x": 1}\n', "line 1: not a plan-log record"),
    ('{"mode": "fast"}\n', "unknown mode 'fast'"),
    ("", "no busy iterations"),
    ('{"mode": "idle"}\n', "no busy iterations"),
])
def test_bad_logs_exit_2_with_the_line(tmp_path, capsys, content, message):
    path = tmp_path / "bad"
    path.write_text(content)
    assert plan_view.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("plan_view: error: ") and message in err


def test_a_missing_number_names_the_field(tmp_path, capsys):
    line = _lines()[0]
    line["measured_s"] = "fast"
    assert plan_view.main([str(_write(tmp_path, [line]))]) == 2
    assert "line 1: measured_s is 'fast', not a finite number" in capsys.readouterr().err


def test_missing_file_and_bad_window(tmp_path, capsys):
    assert plan_view.main([str(tmp_path / "none")]) == 2
    assert "No such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        plan_view.main([str(tmp_path / "none"), "--window", "5:1"])
    assert e.value.code == 2


def test_without_matplotlib_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    assert plan_view.main([str(_write(tmp_path, _lines()))]) == 2
    assert "matplotlib is not installed" in capsys.readouterr().err


def test_imports_neither_torch_nor_sglang():
    import ast
    from pathlib import Path

    tree = ast.parse(Path(plan_view.__file__).read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
             for a in n.names}
    names |= {(n.module or "").split(".")[0] for n in ast.walk(tree)
              if isinstance(n, ast.ImportFrom)}
    assert not names & {"torch", "sglang"}
