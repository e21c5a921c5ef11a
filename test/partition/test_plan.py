"""partition.plan: the one menu rule the runtime builds and the simulator plans with."""

from __future__ import annotations

import pytest

from sglang_duet.partition.plan import (
    every_tpc,
    graph_memory_bytes,
    graphs_wanted,
    menu_for,
    plan_menu,
)
from sglang_duet.partition.sizes import Granularity

GREEN_ALL = tuple(range(16, 113, 8))  # 8-SM groups, >= 16 SMs per side, on 132 SMs


def test_green_contexts_keep_the_graph_sizes_spread_over_the_menu():
    plan = plan_menu("green-ctx", "h100-sxm", 6)
    assert plan.decode_sizes == (16, 32, 56, 72, 96, 112)
    assert plan.decode_graphs and plan.graph_sizes == plan.decode_sizes
    assert plan.decode_host == "lookahead"
    assert plan.sm_menu.decode_sizes == plan.decode_sizes and plan.sm_menu.total_sms == 132


@pytest.mark.parametrize("n", [0, 13, 40])
def test_no_thinning_without_graphs_or_with_enough_of_them(n):
    plan = plan_menu("green-ctx", "h200", n)
    assert plan.decode_sizes == GREEN_ALL
    assert plan.decode_graphs == (n > 0)
    assert plan.decode_host == ("lookahead" if n else "lookahead_eager")


def test_libsmctrl_masks_every_tpc_and_decodes_eagerly():
    plan = plan_menu("libsmctrl", "h100-sxm", 6)
    assert plan.decode_sizes == tuple(range(16, 117, 2))
    assert not plan.decode_graphs and plan.graph_sizes == ()
    assert plan.decode_host == "lookahead_eager"
    assert "libsmctrl" in plan.why


def test_ampere_green_contexts_and_smaller_minima():
    assert plan_menu("green-ctx", "a100-80g", 0).decode_sizes == tuple(range(16, 93, 2))
    assert plan_menu("green-ctx", "h100-sxm", 0, min_decode=8, min_prefill=8).decode_sizes == (
        tuple(range(8, 125, 8)))


def test_sglang_without_graphs_means_eager_partitions():
    assert not plan_menu("green-ctx", "h100-sxm", 6, cuda_graphs=False).decode_graphs
    assert graphs_wanted("green-ctx", True, 6).want


@pytest.mark.parametrize(("backend", "hardware", "match"), [
    ("none", "h100-sxm", "no split to plan"), ("green-ctx", "b200", "no GPU shape"),
])
def test_unknown_names_are_refused(backend, hardware, match):
    with pytest.raises(ValueError, match=match):
        plan_menu(backend, hardware)


def test_no_split_fits():
    with pytest.raises(ValueError, match="no split"):
        menu_for("green-ctx", 24, Granularity(8, 8), min_decode=16, min_prefill=16)


def test_every_tpc_is_the_cpu_and_backend_none_menu():
    menu = every_tpc(16, 2)
    assert menu.decode_sizes == (2, 4, 6, 8, 10, 12, 14) and menu.granularity == 2


def test_graph_memory_is_sglangs_per_capture_estimate():
    assert graph_memory_bytes(6, 256) == 6 * 512 * (1 << 20)
    assert graph_memory_bytes(0, 256, 7) == 7
