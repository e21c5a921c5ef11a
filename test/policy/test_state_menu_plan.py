"""ReqState / PrefillChunk rules, SmMenu construction, BatchPlan serialisation."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sglang_duet.partition.plan import every_tpc, menu_for
from sglang_duet.partition.sizes import Granularity
from sglang_duet.policy import BatchPlan, PrefillChunk, ReqState, SmMenu


def test_req_state_token_rules():
    waiting = ReqState("w", prompt_len=100, computed=30, generated=0)
    assert waiting.remaining_prompt == 70
    running = ReqState("d", prompt_len=100, computed=100, generated=5)
    # the 5th sampled token's KV is written by the next step: 100 prompt + 4 earlier outputs
    assert running.decode_context == 104
    first = ReqState("d1", prompt_len=7, computed=7, generated=1)
    assert first.decode_context == 7


@pytest.mark.parametrize(
    "args", [("x", 0, 0, 0), ("x", 10, 11, 0), ("x", 10, -1, 0), ("x", 10, 0, -1)]
)
def test_req_state_rejects_bad_counts(args):
    with pytest.raises(ValueError):
        ReqState(*args)


def test_prefill_chunk_completion():
    ch = PrefillChunk("r", start=96, length=4)
    assert ch.end == 100
    assert ch.completes(100)
    assert not ch.completes(101)
    assert ch.to_dict() == {"rid": "r", "start": 96, "length": 4}


def test_tpc_and_green_context_menus_on_h100():
    tpc = every_tpc(132)
    assert tpc.decode_sizes == tuple(range(2, 131, 2))
    assert tpc.granularity == 2
    green = menu_for("green-ctx", 132, Granularity(8, 8), 0, False, 8, 8).sm_menu
    assert green.decode_sizes == tuple(range(8, 121, 8))
    assert all(132 - s >= 8 for s in green.decode_sizes)


@given(
    total=st.integers(2, 200),
    gran=st.integers(1, 16),
    min_d=st.integers(1, 40),
    min_p=st.integers(1, 40),
)
def test_menu_for_properties(total, gran, min_d, min_p):
    try:
        menu = menu_for("none", total, Granularity(gran, gran), 0, False, min_d, min_p).sm_menu
    except ValueError:
        # only when nothing fits
        assert not [s for s in range(gran, total, gran) if s >= min_d and total - s >= min_p]
        return
    expected = tuple(s for s in range(gran, total, gran) if s >= min_d and total - s >= min_p)
    assert menu.decode_sizes == expected
    assert menu.total_sms == total


def test_menu_validation():
    with pytest.raises(ValueError):
        SmMenu(132, (4, 2))
    with pytest.raises(ValueError):
        SmMenu(132, (132,))
    with pytest.raises(ValueError):
        SmMenu(132, (3,), granularity=2)
    assert SmMenu(132, [2, 4]).decode_sizes == (2, 4)  # normalised to a tuple


def test_batch_plan_to_dict_is_json():
    plan = BatchPlan(
        "spatial", ("a", "b"), (PrefillChunk("w", 0, 512),), 12, 120, 3, 0.3, 0.09, 0.25, "x"
    )
    d = json.loads(json.dumps(plan.to_dict()))
    assert d["mode"] == "spatial"
    assert d["prefill"] == [{"rid": "w", "start": 0, "length": 512}]
    assert d["decode_rids"] == ["a", "b"]
    assert (d["sms_decode"], d["sms_prefill"], d["lookahead"]) == (12, 120, 3)
    assert plan.num_decode_tokens == 6 and plan.num_prefill_tokens == 512
    assert plan.predicted_tbt_s == 0.09
    idle = BatchPlan.idle()
    assert idle.mode == "idle" and not idle.decode_rids and not idle.prefill
    with pytest.raises(ValueError):
        BatchPlan("mixed", (), (), 0, 0, 1, 0.0, 0.0, 0.0, "")  # type: ignore[arg-type]


def test_named_constructors_fill_each_mode_as_the_module_docstring_says():
    chunk = (PrefillChunk("w", 0, 64),)
    agg = BatchPlan.aggregated(("a",), chunk, 132, 0.05, "mixed")
    assert (agg.mode, agg.sms_decode, agg.sms_prefill, agg.lookahead) == ("aggregated", 132, 132, 1)
    assert agg.predicted_total_s == agg.predicted_decode_s == agg.predicted_prefill_s == 0.05
    sp = BatchPlan.spatial(("a",), chunk, 32, 100, 3, predicted_decode_s=0.02,
                           predicted_prefill_s=0.05, reason="split")
    assert (sp.mode, sp.sms_decode, sp.sms_prefill, sp.lookahead) == ("spatial", 32, 100, 3)
    assert sp.predicted_total_s == 0.06  # max(k * t_d, t_p)
    assert BatchPlan.spatial((), chunk, 32, 100, predicted_total_s=1.0).predicted_total_s == 1.0
    do = BatchPlan.decode_only(("a", "b"), 132, 0.01)
    assert (do.mode, do.prefill, do.sms_decode, do.sms_prefill) == ("decode_only", (), 132, 0)
    assert (do.predicted_total_s, do.predicted_decode_s, do.predicted_prefill_s) == (0.01, 0.01, 0)
