"""The capacity benchmark: the search on a known pass rule, the knob search, a tiny full run."""

from __future__ import annotations

import json

import pytest

import benchmark.capacity.search as search
import benchmark.capacity.sweep as sweep
from benchmark.capacity.__main__ import main
from benchmark.capacity.search import Cluster, Point, Setting, find_capacity
from benchmark.capacity.tuning import knobs_for, xpyd

SCHEDULE_1024 = [f"schedule_policy={p}, token_budget=1024" for p in ("lpm", "dfs-weight", "lof")]


def _fake_evaluate(limit):
    """An evaluate whose runs pass below ``limit(setting)`` QPS; counts its calls."""
    calls = []

    def evaluate(cl, s, qps, requests):
        calls.append((s, round(qps, 4), requests))
        ok = qps <= limit(s, requests)
        steady = {"keeps_up": ok, "attainment": 1.0 if ok else 0.5, "served_ratio": 1.0,
                  "admitted_ratio": 1.0,
                  "ttft_rise_s": 0.0, "sarathi_ok": qps <= 2 * limit(s, requests),
                  "served_rps": min(qps, limit(s, requests))}
        return Point(round(qps, 4), requests, {"steady": steady})

    return evaluate, calls


class TestFindCapacity:
    @pytest.mark.parametrize("start", [1.0, 10.0, 37.0, 300.0])
    def test_brackets_then_bisects_to_the_tolerance(self, monkeypatch, start):
        ev, calls = _fake_evaluate(lambda s, n: 37.0)
        monkeypatch.setattr(search, "evaluate", ev)
        cap, pts = find_capacity(Cluster("azure-code"), Setting("duet"), 100, start, 0.025)
        assert 37.0 / 1.025 <= cap <= 37.0 and len(pts) == len(calls) <= 16

    def test_nothing_passes(self, monkeypatch):
        ev, _ = _fake_evaluate(lambda s, n: 0.0)
        monkeypatch.setattr(search, "evaluate", ev)
        assert find_capacity(Cluster("azure-code"), Setting("duet"), 100, 8.0)[0] == 0.0


def test_setting_knobs_and_labels():
    s = Setting("sglang-pdmux").with_knob("pdmux_decode_bs_divisor", 72)
    s = s.with_knob("kv_xfer_gbps", 49.0).with_knob("pdmux_decode_bs_divisor", 9)
    assert s.knobs == (("kv_xfer_gbps", 49.0), ("pdmux_decode_bs_divisor", 9))
    assert s.label() == "kv_xfer_gbps=49, pdmux_decode_bs_divisor=9"
    assert Setting("duet").label() == "defaults"


def test_xpyd_splits_follow_the_gpus_and_the_models_tp():
    assert xpyd(2, "qwen3-8b") is None
    four = [(v["disagg_prefill"], v["disagg_decode"]) for v in xpyd(4, "qwen3-8b").values]
    assert four == [(1, 1), (1, 3), (2, 2), (3, 1)]
    assert [k.name for k in knobs_for("dynamo", 8, "qwen3-14b")] == ["kv_xfer_gbps", "xPyD"]
    assert all(len(k.values) == 2 for k in knobs_for("sglang-pdmux", 2, "qwen3-8b", quick=True))


def test_router_is_tuned_last_where_there_are_replicas_to_route_among():
    def routers(policy, gpus=2, tp=1):
        k = knobs_for(policy, gpus, "qwen3-14b", tp=tp)
        return [v["router"] for v in k[-1].values] if k and k[-1].name == "router" else []

    # each system's own choices, less its default (the starting point)
    assert routers("sglang-pdmux") == ["total-requests", "total-tokens"]
    assert routers("sglang-chunked") == routers("sglang-default") == routers("sglang-pdmux")
    assert routers("duet") == ["least-tokens", "round-robin", "total-requests", "total-tokens"]
    assert routers("vllm-chunked") == routers("dynamo") == routers("duet-paper") == []
    assert routers("duet", gpus=2, tp=2) == []  # one replica
    assert "router" not in [k.name for k in knobs_for("duet", 2, "qwen3-8b", route=False)]
    assert [k.name for k in knobs_for("duet", 2, "qwen3-14b", tp=2)][-1] == "duet_admission"


def test_coordinate_descent_keeps_only_improvements(monkeypatch):
    best = {1024: 30.0, 256: 20.0, 8192: 10.0}

    def limit(s, n):
        return best.get(dict(s.knobs).get("token_budget", 8192), 25.0)

    ev, _ = _fake_evaluate(limit)
    monkeypatch.setattr(search, "evaluate", ev)
    monkeypatch.setattr(sweep, "evaluate", ev)
    cfg = sweep.SweepConfig(Cluster("azure-code"), ("sglang-chunked",), 100, 8.0)
    r = sweep.sweep_policy(cfg, "sglang-chunked")
    assert r["best"]["setting"] == {"token_budget": 1024}
    assert 30 / 1.025 <= r["best"]["capacity_qps"] <= 30.0
    assert 10 / 1.025 <= r["default"]["capacity_qps"] <= 10.0
    # the 9 chunk sizes, SGLang 0.5.17's three other schedule policies, then SGLang's two
    # other routers (2 replicas) behind the best one
    assert [t["knob"] for t in r["trials"]] == (["token_budget"] * 9 + ["schedule_policy"] * 3
                                                + ["router"] * 2)
    assert [t["value"] for t in r["trials"][9:12]] == [
        {"schedule_policy": p} for p in ("lpm", "dfs-weight", "lof")]
    # hrrn (after 0.5.17) is no tuned value: a reference row on top of the best setting
    ref = r["reference_hrrn"]
    assert ref["setting"] == {"schedule_policy": "hrrn", "token_budget": 1024}
    assert 30 / 1.025 <= ref["capacity_qps"] <= 30.0 and "0.5.17" in ref["note"]
    assert ref["run_length"]["ok"]
    assert r["best"]["run_length"]["ok"]
    assert r["best"]["sarathi_qps"] >= r["best"]["capacity_qps"]
    assert r["best"]["saturation_rps"] == 30.0


def test_schedule_policy_is_tuned_before_the_router_and_hrrn_sits_on_the_best(monkeypatch):
    """lpm beats fcfs at the best chunk size (33 against 30); hrrn, run on top of that best
    setting in place of lpm, reaches 36 and is kept apart from the tuned best."""
    order = {"lpm": 33.0, "hrrn": 36.0}

    def limit(s, n):
        return order.get(dict(s.knobs).get("schedule_policy"), 30.0)

    ev, _ = _fake_evaluate(limit)
    monkeypatch.setattr(search, "evaluate", ev)
    monkeypatch.setattr(sweep, "evaluate", ev)
    cfg = sweep.SweepConfig(Cluster("azure-code"), ("sglang-pdmux",), 100, 8.0)
    r = sweep.sweep_policy(cfg, "sglang-pdmux")
    knobs = [t["knob"] for t in r["trials"]]
    assert knobs.index("schedule_policy") > knobs.index("pdmux_max_prefill_tokens")
    assert knobs[-1] == "router" and "hrrn" not in str(r["trials"])
    assert r["best"]["setting"]["schedule_policy"] == "lpm"
    assert 33 / 1.025 <= r["best"]["capacity_qps"] <= 33.0
    ref = r["reference_hrrn"]
    assert ref["setting"] == {**r["best"]["setting"], "schedule_policy": "hrrn"}
    assert 36 / 1.025 <= ref["capacity_qps"] <= 36.0
    # a cluster that pins the schedule policy tunes none and adds no reference row
    pinned = sweep.SweepConfig(Cluster("azure-code", base={"schedule_policy": "lof"}),
                               ("sglang-pdmux",), 100, 8.0, quick=True)
    r = sweep.sweep_policy(pinned, "sglang-pdmux")
    assert "schedule_policy" not in [t["knob"] for t in r["trials"]]
    assert "reference_hrrn" not in r
    # the others get neither
    r = sweep.sweep_policy(sweep.SweepConfig(Cluster("azure-code"), ("vllm-chunked",), 100, 8.0,
                                             quick=True), "vllm-chunked")
    assert "reference_hrrn" not in r and "schedule_policy" not in str(r["trials"])


@pytest.mark.parametrize("long_limit, used", [(24.0, "long"), (31.0, "short"), (40.0, "short")])
def test_a_longer_run_that_fails_lower_sets_the_capacity(monkeypatch, long_limit, used):
    # the 2x run passes up to long_limit: 24 is > 5% under 30 (the short run hid a drift), 31
    # within 5%, 40 above (a rise is flagged, the shorter figure kept)
    ev, _ = _fake_evaluate(lambda s, n: 30.0 if n == 100 else long_limit)
    monkeypatch.setattr(search, "evaluate", ev)
    monkeypatch.setattr(sweep, "evaluate", ev)
    cfg = sweep.SweepConfig(Cluster("azure-code"), ("sglang-chunked",), 100, 8.0, tune=False)
    b = sweep.sweep_policy(cfg, "sglang-chunked")["best"]
    rl = b["run_length"]
    if used == "long":
        assert not rl["ok"] and b["capacity_qps"] == rl["capacity_qps"] <= 24.0
        assert b["capacity_from"] == "2x run" and 30 / 1.025 <= b["short_run_qps"] <= 30.0
    else:
        assert 30 / 1.025 <= b["capacity_qps"] <= 30.0 and "capacity_from" not in b
        assert rl["ok"] == (long_limit == 31.0)


def test_a_setting_that_holds_over_the_longer_run_beats_one_that_drifts(monkeypatch):
    """token_budget 1024 wins the shorter runs (30) but drifts to 24 over twice the requests;
    256 (28 in both) is then length-checked too and is the best-tuned setting; 8192 (10) and
    the other values (20) and the default (25 < 28) cannot beat 28 and are not."""
    short = {1024: 30.0, 256: 28.0, 8192: 10.0}
    long = {1024: 24.0, 256: 28.0}

    def limit(s, n):
        tb = dict(s.knobs).get("token_budget")
        if tb is None:  # the default
            return 25.0
        return (short if n == 100 else long).get(tb, short.get(tb, 20.0))

    ev, calls = _fake_evaluate(limit)
    monkeypatch.setattr(search, "evaluate", ev)
    monkeypatch.setattr(sweep, "evaluate", ev)
    cfg = sweep.SweepConfig(Cluster("azure-code"), ("sglang-chunked",), 100, 8.0)
    b = sweep.sweep_policy(cfg, "sglang-chunked")["best"]
    assert b["setting"] == {"token_budget": 256} and "capacity_from" not in b
    assert 28 / 1.025 <= b["capacity_qps"] <= 28.0 and b["run_length"]["ok"]
    # 1024's schedule-policy and router trials failed their probes above 30: checked too, and
    # drift as 1024 does
    assert [c["setting"] for c in b["length_checked"]] == [
        "token_budget=1024", *SCHEDULE_1024, "router=total-requests, token_budget=1024",
        "router=total-tokens, token_budget=1024", "token_budget=256"]
    assert b["length_checked"][0]["capacity_qps"] <= 24.0
    long_runs = {dict(s.knobs).get("token_budget") for s, _, n in calls if n == 200}
    assert long_runs == {1024, 256}


def test_a_setting_whose_probe_failed_is_length_checked_too(monkeypatch):
    """token_budget 2048 comes after 1024 (30) and fails the probe at 31.5, but holds 29 over
    twice the requests where 1024 drifts to 24: its shorter-run capacity is searched and it is
    length-checked, and wins; 4096 (20 in both) is searched and cannot beat the figure."""
    short = {1024: 30.0, 2048: 29.0}
    long = {1024: 24.0, 2048: 29.0}

    def limit(s, n):
        tb = dict(s.knobs).get("token_budget")
        if tb is None:  # the default
            return 10.0
        return (short if n == 100 else long).get(tb, 20.0 if tb == 4096 else 5.0)

    ev, calls = _fake_evaluate(limit)
    monkeypatch.setattr(search, "evaluate", ev)
    monkeypatch.setattr(sweep, "evaluate", ev)
    cfg = sweep.SweepConfig(Cluster("azure-code"), ("sglang-chunked",), 100, 8.0)
    r = sweep.sweep_policy(cfg, "sglang-chunked")
    failed = {t["value"]["token_budget"] for t in r["trials"]
              if t["knob"] == "token_budget" and t["capacity_qps"] is None}
    assert {2048, 4096} <= failed
    b = r["best"]
    assert b["setting"] == {"token_budget": 2048} and b["run_length"]["ok"]
    assert 29 / 1.025 <= b["capacity_qps"] <= 29.0
    # then 1024's schedule-policy and router trials (failed at 31.5, and drifting as 1024
    # does); 1024 not again
    assert [c["setting"] for c in b["length_checked"]] == [
        "token_budget=1024", "token_budget=2048", *SCHEDULE_1024,
        "router=total-requests, token_budget=1024", "router=total-tokens, token_budget=1024"]
    long_runs = {dict(s.knobs).get("token_budget") for s, _, n in calls if n == 200}
    assert long_runs == {1024, 2048}


def test_tiny_sweep_writes_json_plot_and_table_and_reuses_its_cache(tmp_path, monkeypatch):
    argv = ["--trace", "azure-code", "--policies", "duet,sglang-chunked", "--requests", "120",
            "--start-qps", "8", "--quick", "--jobs", "1", "--quiet", "--out", str(tmp_path)]
    assert main(argv) == 0
    body = json.loads((tmp_path / "azure-code-qwen3-8b-tp1.json").read_text())
    assert body["stamp"]["command"].startswith("benchmark.capacity --trace azure-code")
    assert "--out" not in body["stamp"]["command"] and str(tmp_path) not in json.dumps(body)
    assert body["config"]["requests"] == 120 and set(body["policies"]) == {"duet",
                                                                          "sglang-chunked"}
    for r in body["policies"].values():
        short = r["best"].get("short_run_qps", r["best"]["capacity_qps"])  # same length
        assert short >= r["default"]["capacity_qps"] > 0
        assert r["best"]["run_length"]["requests"] == 240
        pts = r["best"]["points"]
        assert pts == sorted(pts, key=lambda p: (p["requests"], p["qps"]))
    # sglang-chunked's best setting and its hrrn reference row (after SGLang 0.5.17): the
    # higher of the two is the best alternative; duet has no reference row
    chunked = body["policies"]["sglang-chunked"]
    ref = chunked["reference_hrrn"]
    assert ref["setting"] == {**chunked["best"]["setting"], "schedule_policy": "hrrn"}
    assert "reference_hrrn" not in body["policies"]["duet"]
    alts = {"sglang-chunked": chunked["best"]["capacity_qps"],
            "sglang-chunked+hrrn": ref["capacity_qps"]}
    assert body["ratios"]["best_alternative"] == max(alts, key=alts.get)
    assert (tmp_path / "azure-code-qwen3-8b-tp1.png").stat().st_size > 1000
    md = (tmp_path / "README.md").read_text()
    assert "| duet |" in md and "best-tuned" in md
    runs = []
    monkeypatch.setattr(search.Simulation, "run", lambda self: runs.append(1))
    assert main(argv) == 0 and runs == []  # every point came from the cache
    again = json.loads((tmp_path / "azure-code-qwen3-8b-tp1.json").read_text())["policies"]
    for r in (*again.values(), *body["policies"].values()):
        r.pop("wall_s")
    assert again == body["policies"]


def test_bad_arguments_exit_2(tmp_path, capsys):
    assert main(["--policies", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown policy 'nope'" in capsys.readouterr().err
    assert main(["--set", "nope=1", "--out", str(tmp_path)]) == 2
    assert main(["--gpus", "3", "--policies", "dynamo", "--out", str(tmp_path)]) == 2
    assert main(["--set", "frontend=maybe", "--out", str(tmp_path)]) == 2


def test_set_parses_booleans_by_their_words():
    from benchmark.capacity.__main__ import _overrides

    assert _overrides(["frontend=false", "prefix_cache=0"]) == {"frontend": False,
                                                                "prefix_cache": False}
    assert _overrides(["frontend=True", "interference=none", "tp=2"]) == {
        "frontend": True, "interference": "none", "tp": 2}


def test_keep_others_carries_the_policies_not_rerun_with_their_commit(tmp_path, capsys):
    from benchmark.capacity import report
    from benchmark.capacity.__main__ import keep_others

    cluster = {"trace": "azure-code", "model": "qwen3-8b", "tp": 1, "gpus": 2}
    best = {"capacity_qps": 1.0, "label": "defaults", "points": []}

    def pol(cap):
        return {"default": {**best, "capacity_qps": cap}, "best": {**best, "capacity_qps": cap}}

    old = {"stamp": {"commit": "abc123", "command": "benchmark.capacity --trace azure-code"},
           "config": {"cluster": cluster, "policies": ["duet", "sglang-pdmux"]},
           "policies": {"duet": pol(30.0), "sglang-pdmux": pol(32.0)}}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    new = {"config": {"cluster": cluster, "policies": ["duet"]}, "policies": {"duet": pol(36.0)}}
    got = keep_others(new, str(path))
    assert list(got["policies"]) == ["duet", "sglang-pdmux"] == got["config"]["policies"]
    assert got["policies"]["duet"] == pol(36.0)  # rerun: not marked
    assert got["policies"]["sglang-pdmux"]["carried_from"]["commit"] == "abc123"
    assert report.ratios(got)["vs_sglang-pdmux"] == round(36 / 32, 3)
    md = report.markdown({**got, "wall_s": 1.0, "config": {**got["config"], "requests": 10,
                          "cluster": {**cluster, "hardware": "h100-sxm", "tbt_slo_ms": 100.0,
                                      "ttft_slo_ms": 1e4, "target": 0.9}}})
    assert "sglang-pdmux at abc123" in md
    assert keep_others(new, str(tmp_path / "none.json")) is new  # nothing to carry
    path.write_text(json.dumps({**old, "config": {"cluster": {**cluster, "tp": 2}}}))
    with pytest.raises(ValueError, match="another cluster"):
        keep_others(new, str(path))
    assert main(["--keep-others", "--out", str(tmp_path)]) == 2
    assert "--keep-others needs --policies" in capsys.readouterr().err


def test_the_point_cache_hash_leaves_out_only_what_the_simulator_never_imports():
    """Cached points are keyed by `source_hash`, which skips `SIM_FREE`: a simulated run must
    import nothing from there, or an edit to it would not invalidate the cache."""
    import subprocess
    import sys

    code = ("import sys, benchmark.capacity.search, benchmark.router.capacity, "
            "sglang_duet.sim, sglang_duet.sim.engine, sglang_duet.router\n"
            f"bad = [m for m in sys.modules if m.split('.')[1:2] and m.split('.')[1] in "
            f"{search.SIM_FREE!r} and m.startswith('sglang_duet.')]\n"
            "print(bad); sys.exit(1 if bad else 0)")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert got.returncode == 0, got.stdout + got.stderr


def test_the_index_leaves_a_study_readme_alone(tmp_path):
    """A folder given to --out may hold a study's own README: the index does not replace it,
    and it rewrites its own."""
    from benchmark.capacity.report import HAND_WRITTEN, INDEX_TITLE, write_index

    study = tmp_path / "study"
    study.mkdir()
    (study / "README.md").write_text("# A study\n\nprose\n")
    write_index(str(study))
    assert (study / "README.md").read_text() == "# A study\n\nprose\n"
    index = tmp_path / "index"
    index.mkdir()
    (index / "README.md").write_text(INDEX_TITLE + "\n\nstale\n")
    (index / "case.md").write_text("### case\n")
    write_index(str(index))
    body = (index / "README.md").read_text()
    assert body.startswith(INDEX_TITLE) and "stale" not in body and "### case" in body
    # the hand-written tail (the figures' history) survives every rewrite, once
    (index / "README.md").write_text(body + f"{HAND_WRITTEN}\n## History\n\nprose\n")
    (index / "case.md").write_text("### case 2\n")
    write_index(str(index))
    write_index(str(index))
    body = (index / "README.md").read_text()
    assert "### case 2" in body and "### case\n" not in body
    assert body.count(HAND_WRITTEN) == 1 and body.endswith(f"{HAND_WRITTEN}\n## History\n\nprose\n")


def test_the_sweep_table_and_ratios_carry_the_hrrn_reference_row():
    """report.ratios counts ``<policy>+hrrn`` as an alternative; the sweep's table gives it a
    row of its own, labelled as needing SGLang after 0.5.17."""
    from benchmark.capacity import report

    def best(cap, label="defaults"):
        return {"capacity_qps": cap, "label": label, "setting": {}, "points": []}

    result = {"config": {"requests": 100, "cluster": {
        "trace": "mooncake", "model": "qwen3-8b", "tp": 1, "gpus": 2, "hardware": "h100-sxm",
        "tbt_slo_ms": 100.0, "ttft_slo_ms": 10000.0, "target": 0.9}},
        "policies": {"duet": {"default": best(1.0), "best": best(1.2)},
                     "sglang-chunked": {"default": best(1.0), "best": best(1.1),
                                        "reference_hrrn": best(1.5, "schedule_policy=hrrn")}},
        "wall_s": 1.0}
    rt = report.ratios(result)
    assert rt["best_alternative"] == "sglang-chunked+hrrn"
    assert rt["vs_best_alternative"] == round(1.2 / 1.5, 3)
    assert rt["vs_sglang-chunked"] == round(1.2 / 1.1, 3)
    assert rt["vs_best_aggregated"] == round(1.2 / 1.1, 3)  # tuned 0.5.17 rows only
    md = report.markdown(result)
    assert "| sglang-chunked+hrrn (SGLang after 0.5.17) | - | 1.5 | schedule_policy=hrrn |" in md
    assert "best alternative (sglang-chunked+hrrn (SGLang after 0.5.17)): 0.80x" in md


def _committed(monkeypatch, limit, policy="sglang-chunked", knobs=("token_budget",)):
    """A sweep of ``policy`` as committed before ``schedule_policy`` existed: its trials cover
    only ``knobs`` (the fake runs pass below ``limit``)."""
    ev, calls = _fake_evaluate(limit)
    for mod in (search, sweep):
        monkeypatch.setattr(mod, "evaluate", ev)
    monkeypatch.setattr(sweep, "knobs_for", lambda *a, **k: tuple(
        kb for kb in knobs_for(*a, **k) if kb.name in knobs))
    cfg = sweep.SweepConfig(Cluster("azure-code"), (policy,), 100, 8.0)
    old = sweep.sweep_policy(cfg, policy)
    monkeypatch.setattr(sweep, "knobs_for", knobs_for)
    old.pop("reference_hrrn", None)
    calls.clear()
    return cfg, old, calls


def test_a_committed_sweep_carries_on_over_the_knobs_it_never_tried(monkeypatch):
    """lpm wins (33 against fcfs's 30 at chunk 1024): the descent continues from the committed
    best over schedule_policy (and the router after it), never the chunk sizes again; the
    default and the old trials are kept, the new best is length-checked and hrrn added."""
    def limit(s, n):
        k = dict(s.knobs)
        return (30.0 if k.get("token_budget") == 1024 else 20.0) + (
            3.0 if k.get("schedule_policy") == "lpm" else 0.0)

    cfg, old, calls = _committed(monkeypatch, limit)
    r = sweep.sweep_policy(cfg, "sglang-chunked", old)
    assert r["default"] == old["default"]
    assert r["trials"][:len(old["trials"])] == old["trials"]
    new = [t["knob"] for t in r["trials"][len(old["trials"]):]]
    assert new == ["schedule_policy"] * 3 + ["router"] * 2
    assert not any(dict(s.knobs).get("token_budget") not in (1024, None) for s, _, _ in calls)
    assert r["best"]["setting"] == {"schedule_policy": "lpm", "token_budget": 1024}
    assert 33 / 1.025 <= r["best"]["capacity_qps"] <= 33.0 and r["best"]["run_length"]["ok"]
    assert r["reference_hrrn"]["setting"]["schedule_policy"] == "hrrn"
    assert r["extended"]["knobs"] == ["schedule_policy", "router"]


def test_a_committed_best_that_stands_is_kept_with_its_run_at_capacity_refreshed(monkeypatch):
    cfg, old, calls = _committed(monkeypatch, lambda s, n: 30.0)
    r = sweep.sweep_policy(cfg, "sglang-chunked", old)
    assert r["best"]["setting"] == old["best"]["setting"]
    assert r["best"]["capacity_qps"] == old["best"]["capacity_qps"]
    assert r["best"]["run_length"] == old["best"]["run_length"]  # not searched again
    refreshed = [c for c in calls if c[1] == round(old["best"]["capacity_qps"], 4)
                 and dict(c[0].knobs) == old["best"]["setting"]]
    assert refreshed  # its run at capacity, re-evaluated
    assert "reference_hrrn" in r and r["extended"]["knobs"]
