"""The GPU check's time plan (benchmark/gpu/plan.py): caps inside stage budgets, the check
inside one call, start + check + one re-run inside a task's device time."""

from __future__ import annotations

from benchmark.gpu import plan


def test_required_caps_fit_their_stage_and_names_are_unique():
    names = [s.name for s in plan.STEPS]
    assert len(names) == len(set(names))
    assert {s.stage for s in plan.STEPS} == set(plan.STAGE_BUDGET_S)
    for stage, budget in plan.STAGE_BUDGET_S.items():
        assert sum(s.cap_s for s in plan.steps(stage) if s.required) <= budget, stage


def test_the_plan_fits_the_device_time():
    t = plan.time_plan()
    assert t["fits"] and all(s["caps_fit"] for s in t["stages"].values())
    assert t["check_s"] <= plan.CALL_LIMIT_S
    assert t["start_check_rerun_s"] == (plan.MACHINE_START_S + t["check_s"] + t["rerun_s"])
    assert t["start_check_rerun_s"] <= plan.DEVICE_TIME_S
    # the re-run repeats the setup (a fresh site) and the larger stage
    assert t["rerun_s"] == plan.STAGE_BUDGET_S["setup"] + plan.STAGE_BUDGET_S["2"]


def test_the_arithmetic_says_no_when_it_does_not_fit(monkeypatch):
    monkeypatch.setitem(plan.STAGE_BUDGET_S, "2", 400)
    assert not plan.time_plan()["fits"]
    monkeypatch.setitem(plan.STAGE_BUDGET_S, "2", 10)  # under its required caps
    t = plan.time_plan()
    assert not t["stages"]["2"]["caps_fit"] and not t["fits"]


def test_optional_steps_come_after_the_required_ones_of_their_stage():
    """check.sh gives an optional step only what its stage has left, so it must run last."""
    for stage in plan.STAGE_BUDGET_S:
        kinds = [s.required for s in plan.steps(stage)]
        assert kinds == sorted(kinds, reverse=True), stage


def test_shell_lines(capsys):
    assert plan.main(["--shell"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "CAP_serving=110" in lines and "BUDGET_2=225" in lines
    assert len(lines) == len(plan.STEPS) + len(plan.STAGE_BUDGET_S)
