"""CLI: JSON shape, the comparison table, one-line errors with exit code 2."""

from __future__ import annotations

import json

import pytest

from sglang_duet.sim import RESULT_KEYS, policy_names
from sglang_duet.sim.cli import main


def test_all_policies_json(tmp_path, capsys):
    out = tmp_path / "run.json"
    rc = main(["--trace", "azure-code", "--policy", "all", "--qps", "4", "--num-requests", "40",
               "--out", str(out)])
    assert rc == 0
    report = json.loads(out.read_text())
    assert report["config"]["policy"] == "all"
    assert report["config"]["workload"]["requests"] == 40
    assert list(report["results"]) == policy_names()
    for m in report["results"].values():
        assert set(RESULT_KEYS) <= set(m)
        assert m["completed"] == 40
    table = capsys.readouterr().out
    for name in policy_names():
        assert name in table
    # the router each ran behind, resolved from "auto" to the system's own default
    routers = {n: m["setup"]["router"] for n, m in report["results"].items()}
    assert report["config"]["router"] == "auto"
    assert routers["duet"] == "duet" and routers["sglang-pdmux"] == "round-robin"
    assert routers["vllm-chunked"] == "round-robin"


def test_pinned_router_is_recorded(tmp_path):
    out = tmp_path / "run.json"
    assert main(["--trace", "azure-code", "--policy", "duet", "--qps", "4", "--num-requests",
                 "10", "--router", "total-tokens", "--quiet", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["results"]["duet"]["setup"]["router"] == "total-tokens"


def test_quiet_single(tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["--trace", "mooncake", "--num-requests", "5", "--quiet", "--out", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert json.loads(out.read_text())["results"]["duet"]["completed"] == 5


@pytest.mark.parametrize(
    "argv",
    [["--policy", "nope"], ["--trace", "/no/such/trace.csv"], ["--model", "gpt-5"],
     ["--hardware", "tpu"], ["--router", "random"], ["--gpus", "3", "--tp", "2"],
     ["--model", "qwen3-14b", "--hardware", "a100-80g", "--mem-fraction", "0.3"],
     ["--policy", "dynamo", "--gpus", "1"], ["--qps", "0"]],
)
def test_errors_are_one_line_exit_2(argv, capsys):
    assert main(argv + ["--num-requests", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sglang_duet.sim: error:")


@pytest.mark.parametrize("argv", [["--tbt-slo-ms", "nan"], ["--ttft-slo-ms", "inf"],
                                  ["--qps", "nan"], ["--mem-fraction", "nan"]])
def test_non_finite_times_rejected(argv, capsys):
    """#16 item 8: NaN/inf are not times; the simulator says so like the server does."""
    assert main(argv + ["--num-requests", "3", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "finite" in err[0] and argv[0] in err[0]


def test_help_lists_registry_choices_and_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "[default: 100.0]" in out and "h100-sxm" in out and "round-robin" in out
