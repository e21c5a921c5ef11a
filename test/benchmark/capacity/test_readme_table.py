"""The README's capacity table and docs/capacity.md's full one are the committed capacity results,
not figures typed once: the README's block is `summary.short_table` of the committed summary.json,
the document's `summary.table`, and summary.json is what `summary.summarize` makes of the
committed sweep JSONs now (bounds recomputed)."""

from __future__ import annotations

import json

import pytest

from benchmark.capacity import summary as S
from benchmark.capacity.report import alternatives
from benchmark.stamp import ROOT
from sglang_duet.sim.policies import POLICIES

RESULTS = ROOT / "benchmark" / "results" / "capacity"


def _committed() -> dict:
    body = json.loads((RESULTS / "summary.json").read_text())
    body.pop("stamp")
    return body


def test_readme_block_is_the_summary_table():
    text = (ROOT / "README.md").read_text()
    assert S.readme_block(_committed()) in text


def _span(ratios: list[float]) -> str:
    return f"{round(100 * (min(ratios) - 1))}-{round(100 * (max(ratios) - 1))}%"


def test_readme_headline_is_the_json():
    """The intro's figures are summary.json's: on Mooncake duet over the best released
    alternative and over the best one (a reference row, newer SGLang), and on changing
    traffic over the best alternative tuned once."""
    got = _committed()
    moon = [c for c in got["cases"] if c["trace"] == "mooncake"]
    text = " ".join((ROOT / "README.md").read_text().split())
    released = _span([c["vs_best_released_alternative"] for c in moon])
    assert f"serves {released} more requests per second on Mooncake" in text
    assert f"({_span([c['vs_best_alternative'] for c in moon])} more than SGLang's newer" in text
    changing = _span([r["vs_best_alternative"] for r in got["changing"]])
    assert f"{changing} more on traffic whose mix changes" in text


def test_capacity_doc_block_is_the_full_table():
    text = (ROOT / "docs" / "capacity.md").read_text()
    assert S.doc_block(_committed()) in text


def test_readme_rows_are_the_json():
    """Each README row carries the case's figures from summary.json: duet, the alternative with
    its setting (the router where tuned), the ratio and both shares of the bound."""
    got = _committed()
    rows = S.short_table(got).splitlines()
    assert len(rows) == 2 + len(got["cases"])
    for c, row in zip(got["cases"], rows[2:], strict=True):
        cells = [x.strip() for x in row.strip("|").split("|")]
        assert float(cells[1]) == pytest.approx(c["duet"], rel=0.005)  # 3 significant digits
        assert cells[2].startswith(c["best_alternative"] + " ")
        assert cells[2].endswith(f"({c['best_alternative_setting']})")
        assert cells[3] == f"{c['vs_best_alternative']:.2f}x"
        assert cells[4] == (f"{c['duet_share_of_bound']:.0%}, "
                            f"{c['alternative_share_of_bound']:.0%}")


def test_summary_is_the_sweeps():
    want = json.loads(json.dumps(S.summarize(str(RESULTS))))
    got = _committed()
    assert [c["file"] for c in got["cases"]] == [c["file"] for c in want["cases"]]
    assert got == want
    assert len(got["cases"]) == 6  # 3 traces x (Qwen3-8B TP=1, Qwen3-14B TP=2)
    by = {c["file"]: c for c in got["cases"]}
    # the routers resolved: the tuned one where the label names it, else the system's own
    for c in got["cases"]:
        for pol, label in (("duet", None), (c["best_alternative"],
                                            c["best_alternative_setting"])):
            r = c["routers"][pol]
            if label is not None and "router=" in label:
                assert f"router={r}" in label
            elif pol != "duet":  # a reference row (<policy>+hrrn) runs behind its policy's
                assert r == POLICIES[pol.split("+")[0]].router
    assert by["mooncake-qwen3-8b-tp1.json"]["routers"]["duet"] == "duet"


def test_target_rule(tmp_path):
    """The table row of a case whose alternative passes 90% of the bound: then the alternative is
    the target."""
    case = {"trace": "t", "model": "qwen3-8b", "tp": 1, "duet": 30.0, "duet_paper": 20.0,
            "best_alternative": "x", "best_alternative_qps": 29.0,
            "best_alternative_setting": "defaults", "vs_best_alternative": 1.03,
            "bound_qps": 32.0, "compute_floor_qps": 60.0, "duet_share_of_bound": 0.94,
            "alternative_share_of_bound": 0.91,
            "target_qps": 29.0, "target_kind": "the alternative", "target_met": True,
            "not_below_alternative": True}
    row = S.table({"cases": [case]}).splitlines()[2]
    assert row.startswith("| t, Qwen3-8B | 30.0 | 20.0 | x 29.0 (defaults) | 1.03x | - | 32.0 |")
    assert "| 94% | 91% | - | 60.0 |" in row  # no queue-aware bound in this case: "-"
    assert row.endswith("| 60.0 | 29.0 (the alternative) | yes | - |")
    short = S.short_table({"cases": [case]}).splitlines()[2]
    assert short == "| t, Qwen3-8B | 30.0 | x 29.0 (defaults) | 1.03x | 94%, 91% |"
    (tmp_path / "R.md").write_text(f"a\n{S.MARK_BEGIN}\nold\n{S.MARK_END}\n"
                                   f"{S.DOC_BEGIN}\nold\n{S.DOC_END}\nb\n")
    S.write_readme({"cases": [case]}, str(tmp_path / "R.md"))
    S.write_block(str(tmp_path / "R.md"), S.doc_block({"cases": [case]}))
    assert (tmp_path / "R.md").read_text() == (
        f"a\n{S.readme_block({'cases': [case]})}\n{S.doc_block({'cases': [case]})}\nb\n")
    (tmp_path / "N.md").write_text("no markers\n")
    with pytest.raises(ValueError, match="no"):
        S.write_readme({"cases": [case]}, str(tmp_path / "N.md"))


def test_target_of():
    assert S.target_of(10.0, 100.0) == (12.0, "1.2x alternative")
    assert S.target_of(30.0, 35.0) == (31.5, "90% of bound")
    assert S.target_of(41.3, 44.0) == (41.3, "the alternative")  # 90% of the bound is below it


def test_lower_run():
    """The lower of the two run lengths: a 3% fall (inside the 5% the figure ignores) counts, a
    rise and a missing 2x run leave the figure."""
    best = {"capacity_qps": 1.6, "run_length": {"capacity_qps": 1.54, "sets_figure": False}}
    assert S.lower_run(best) == 1.54
    assert S.lower_run({"capacity_qps": 1.5, "run_length": {"capacity_qps": 1.6}}) == 1.5
    assert S.lower_run({"capacity_qps": 1.5}) == 1.5


def test_lower_run_column_is_the_sweeps():
    """Each committed case's lower-run comparison is duet's lower run against the best of the
    alternatives' lower runs, from the sweep JSON."""
    for c in _committed()["cases"]:
        body = json.loads((RESULTS / c["file"]).read_text())
        low = {name: S.lower_run(e) for name, (_, e) in alternatives(body["policies"]).items()}
        low["duet"] = S.lower_run(body["policies"]["duet"]["best"])
        alt = max((p for p in low if p != "duet"), key=low.get)
        assert c["lower_run"]["best_alternative"] == alt
        assert c["lower_run"]["vs_best_alternative"] == round(low["duet"] / low[alt], 3)


def test_limit_of():
    """A run past capacity: its largest miss cause and share, and whether it falls behind."""
    def point(att, keeps, **c):
        causes = {"window": 100, "met": 0, "ttft": 0, "tbt_server": 0, "tbt_client": 0,
                  "both": 0, "unserved": 0, **c}
        return {"attainment": att, "keeps_up": keeps, "causes": causes}

    assert S.limit_of(point(0.87, True, ttft=13)) == "TTFT 13%"
    assert S.limit_of(point(0.889, False, tbt_client=11, ttft=1)) == (
        "delivered TBT 11%, falls behind")
    assert S.limit_of(point(0.98, False, tbt_client=2)) == "falls behind (delivered TBT 2%)"
    assert S.limit_of(point(1.0, False)) == "falls behind"
    assert S.limit_of(point(0.99, False, tbt_client=0.2)) == "falls behind (delivered TBT <1%)"
    assert S.limit_of(point(0.5, True, tbt_server=30, both=20)) == "TBT 30%"


def test_a_reference_row_is_an_alternative_named_after_sglang_0_5_17(tmp_path, monkeypatch):
    """sglang-chunked's hrrn reference row (12) beats every tuned alternative (10, 9): it is the
    best alternative, named ``sglang-chunked+hrrn`` and labelled as needing SGLang after 0.5.17
    in the tables; the tuned rows stay in ``alternatives``."""
    def entry(cap, setting):
        return {"setting": setting, "capacity_qps": cap,
                "label": ", ".join(f"{k}={v}" for k, v in sorted(setting.items())) or "defaults"}

    body = {"stamp": {"commit": "x"},
            "config": {"requests": 100, "cluster": {"trace": "azure-code", "model": "qwen3-8b",
                                                    "tp": 1, "gpus": 2,
                                                    "hardware": "h100-sxm"}},
            "policies": {
                "duet": {"best": entry(13.0, {}), "default": entry(12.0, {})},
                "sglang-chunked": {"best": entry(10.0, {"token_budget": 2048}),
                                   "reference_hrrn": {"note": "SGLang after 0.5.17", **entry(
                                       12.0, {"token_budget": 2048,
                                              "schedule_policy": "hrrn"})}},
                "vllm-chunked": {"best": entry(9.0, {})}}}
    path = tmp_path / "azure-code-qwen3-8b-tp1.json"
    path.write_text(json.dumps(body))
    monkeypatch.setattr(S, "physical_bound", lambda cfg: {
        "capacity_qps": 20.0, "mixture": {}, "serial_qps": 15.0, "compute_floor_qps": 40.0})
    monkeypatch.setattr(S, "checked_queue_bound", lambda cfg, n, t, orders=(): {
        "queue_qps": 18.0, "queue_ceiling_qps": 19.0, "requests": n, "queue_best_qps": 18.5,
        "queue_best_order": "sjf"})
    c = S.summarize(str(tmp_path))["cases"][0]
    assert c["alternatives"] == {"sglang-chunked": 10.0, "sglang-chunked+hrrn": 12.0,
                                 "vllm-chunked": 9.0}
    assert c["best_alternative"] == "sglang-chunked+hrrn" and c["best_alternative_qps"] == 12.0
    assert c["best_alternative_setting"] == "schedule_policy=hrrn, token_budget=2048"
    assert c["references"] == {"sglang-chunked+hrrn":
                               "sglang-chunked+hrrn (SGLang after 0.5.17)"}
    assert c["vs_best_alternative"] == round(13 / 12, 3)
    assert c["routers"]["sglang-chunked+hrrn"] == POLICIES["sglang-chunked"].router
    assert c["lower_run"]["best_alternative"] == "sglang-chunked+hrrn"
    # the best one a 0.5.17 user can run, and the order-aware bound (the higher of the two)
    assert c["best_released_alternative"] == "sglang-chunked"
    assert c["vs_best_released_alternative"] == round(13 / 10, 3)
    assert c["order_aware_bound_qps"] == 18.5
    for text in (S.table({"cases": [c]}), S.short_table({"cases": [c]})):
        assert "sglang-chunked+hrrn (SGLang after 0.5.17) 12.0" in text


def test_readme_changing_rows_are_the_json():
    """The README's changing-traffic rows carry the committed changing/*.json figures."""
    got = _committed()
    want = S.changing(str(RESULTS))
    assert got.get("changing") == json.loads(json.dumps(want))
    assert {r["workload"] for r in want} == {"daily-drift", "prefill-decode-switch"}
    readme = (ROOT / "README.md").read_text()
    block = readme.split(S.CHANGE_BEGIN)[1].split(S.CHANGE_END)[0].strip()
    assert block == S.changing_table(want)
