"""build_menu: which partition sizes the policy may choose, and which get decode graphs."""

from __future__ import annotations

import pytest

import sglang_duet.partition as partition
from sglang_duet.args import DuetArgs
from sglang_duet.partition import PartitionBackend, PartitionMenu, RawPair
from sglang_duet.partition.plan import plan_menu, table_granularity
from sglang_duet.runtime.components import CPU_PROFILE, build_components, build_menu

TINY = {"model_type": "qwen3", "hidden_size": 256, "num_attention_heads": 8,
        "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512,
        "num_hidden_layers": 3, "vocab_size": 1000}


class Backend(PartitionBackend):
    """A fake 132-SM H100 backend that answers with the table's granularity."""

    name = "green-ctx"

    def __init__(self):
        self.open = set()
        self.made = []

    def available(self, device=0):
        return True, ""

    def num_sms(self, device=0):
        return 132

    def granularity(self, device=0):
        return table_granularity(self.name, "h100-sxm")[1]

    def create_pair(self, device, decode_sms, min_prefill_sms):
        self.made.append(decode_sms)
        self.open.add(decode_sms)
        return RawPair(decode_sms, -decode_sms, decode_sms, 132 - decode_sms,
                       lambda: self.open.discard(decode_sms))


@pytest.fixture(params=["green-ctx"])
def gpu_menu(monkeypatch, request):
    backend = Backend()
    backend.name = request.param

    def build(name, device, min_decode=16, min_prefill=16, select=None):
        menu = PartitionMenu.build(backend, device, min_decode, min_prefill, select=select)
        return menu, "fake green contexts"

    monkeypatch.setattr(partition, "build_partition_menu", build)
    monkeypatch.setattr(partition, "cross_context_events", lambda menu: "")  # the GPU's answer
    return backend


ALL = tuple(range(16, 113, 8))


def test_graphs_on_a_spread_of_sizes_and_the_policy_menu_matches(gpu_menu):
    sm_menu, parts, backend, graph_sizes = build_menu(
        DuetArgs(decode_graph_sizes=4), CPU_PROFILE, "cuda", 0, cuda_graphs=True
    )
    assert graph_sizes == (16, 48, 80, 112)
    assert sm_menu.decode_sizes == parts.decode_sizes == graph_sizes
    assert backend == "green-ctx"
    assert gpu_menu.open == set(graph_sizes)
    assert gpu_menu.made == list(graph_sizes)  # only the kept splits were ever created


@pytest.mark.parametrize(
    ("args", "cuda_graphs"),
    [(DuetArgs(decode_graph_sizes=0), True), (DuetArgs(), False)],
)
def test_no_graphs_keeps_the_whole_menu(gpu_menu, args, cuda_graphs):
    sm_menu, parts, _, graph_sizes = build_menu(args, CPU_PROFILE, "cuda", 0, cuda_graphs)
    assert graph_sizes == ()
    assert sm_menu.decode_sizes == parts.decode_sizes == ALL


@pytest.mark.parametrize("gpu_menu", ["green-ctx", "libsmctrl"], indirect=True)
@pytest.mark.parametrize(("n", "least"), [(0, 16), (4, 16), (6, 16), (30, 16), (6, 8)])
def test_the_simulator_plans_exactly_the_runtimes_menu(gpu_menu, n, least):
    """One rule: the menu the runtime builds equals `plan_menu`, what the simulator's duet
    plans with, sizes, graphs and the spatial decode step's host kind alike."""
    args = DuetArgs(decode_graph_sizes=n, partition_backend=gpu_menu.name, hardware="h100-sxm",
                    partition_min_sms=least)
    menus = build_menu(args, CPU_PROFILE, "cuda", 0, cuda_graphs=True)
    plan = plan_menu(gpu_menu.name, "h100-sxm", n, min_decode=least, min_prefill=least)
    assert menus.sm_menu == plan.sm_menu
    assert menus.graph_sizes == plan.graph_sizes
    assert gpu_menu.made == list(plan.decode_sizes)
    parts = build_components(args, hf_config=TINY, tp_size=1, device="cuda", gpu_id=0,
                             token_budget=8192, cuda_graphs=True)
    assert parts.policy.menu == plan.sm_menu
    assert parts.policy.decode_host == plan.decode_host


def test_aggregated_mode_builds_no_partitions(gpu_menu):
    menus = build_menu(DuetArgs(mode="aggregated"), CPU_PROFILE, "cuda", 0, cuda_graphs=True)
    assert menus.partitions is None and menus.graph_sizes == () and gpu_menu.made == []


def test_cpu_has_no_partitions_and_no_graphs():
    sm_menu, parts, backend, graph_sizes = build_menu(DuetArgs(), CPU_PROFILE, "cpu", 0)
    assert (parts, backend, graph_sizes) == (None, "none", ())
    assert len(sm_menu) > 1


def test_flag_is_validated():
    from sglang_duet.args import DuetArgError

    with pytest.raises(DuetArgError, match="--duet-decode-graph-sizes"):
        DuetArgs(decode_graph_sizes=-1)


def test_model_spec_from_sglangs_loaded_config_not_a_path():
    """A hub id (resolved by SGLang from the HF cache) has no local config.json to open: the
    spec comes from SGLang's loaded hf_config."""
    from transformers import Qwen3Config

    from sglang_duet.runtime.components import model_spec

    cfg = Qwen3Config(hidden_size=256, num_attention_heads=8, num_key_value_heads=2,
                      head_dim=32, intermediate_size=512, num_hidden_layers=3, vocab_size=1000)
    cfg._name_or_path = "Qwen/Qwen3-8B"  # a hub id, no such directory here
    spec = model_spec(cfg, tp_size=2)
    assert (spec.hidden, spec.num_layers, spec.num_kv_heads, spec.tp) == (256, 3, 2, 2)


# --- start-up fallbacks: refused events, ranks that built different splits --------------------
def test_refused_events_fall_back_to_none_at_start_up(gpu_menu, monkeypatch, caplog):
    """SGLang's own decode replay records primary-context events on the partition stream, so
    a driver that refuses them leaves no usable split: backend none, streams released."""
    monkeypatch.setattr(partition, "cross_context_events", lambda menu: "invalid handle")
    menus = build_menu(DuetArgs(decode_graph_sizes=4), CPU_PROFILE, "cuda", 0, cuda_graphs=True)
    assert (menus.partitions, menus.backend, menus.graph_sizes) == (None, "none", ())
    assert len(menus.sm_menu) > 1 and gpu_menu.open == set()
    assert "refuse a primary-context event (invalid handle)" in caplog.text
    parts = build_components(DuetArgs(decode_graph_sizes=4, hardware="h100-sxm"), hf_config=TINY,
                             tp_size=1,
                             device="cuda", gpu_id=0, token_budget=8192, cuda_graphs=True)
    assert parts.backend_name == "none" and parts.policy.decode_host == "lookahead_eager"


def _ranks(*others):
    """An `agree` whose rank 0 is this one and ranks 1.. answer `others`; records calls."""
    calls = []

    def agree(value):
        calls.append(value)
        return [value, *others]

    return agree, calls


def test_tp_ranks_keep_the_splits_every_rank_built(gpu_menu, caplog):
    agree, calls = _ranks(("green-ctx", (16, 48, 112)))
    menus = build_menu(DuetArgs(decode_graph_sizes=4), CPU_PROFILE, "cuda", 0, True, agree)
    assert calls == [("green-ctx", (16, 48, 80, 112))]
    assert menus.graph_sizes == menus.partitions.decode_sizes == (16, 48, 112)
    assert menus.sm_menu.decode_sizes == (16, 48, 112) and gpu_menu.open == {16, 48, 112}
    assert "every rank keeps [16, 48, 112]" in caplog.text


@pytest.mark.parametrize("other", [("none", ()), ("green-ctx", ()), ("libsmctrl", ALL)])
def test_a_fallback_on_one_rank_is_a_fallback_on_every_rank(gpu_menu, other):
    agree, _ = _ranks(other)
    menus = build_menu(DuetArgs(), CPU_PROFILE, "cuda", 0, True, agree)
    assert (menus.partitions, menus.backend) == (None, "none") and gpu_menu.open == set()


def test_refused_events_on_this_rank_tell_the_others(gpu_menu, monkeypatch):
    """The collective runs on every rank whatever it found: this rank offers no split."""
    monkeypatch.setattr(partition, "cross_context_events", lambda menu: "invalid handle")
    agree, calls = _ranks(("green-ctx", ALL))
    assert build_menu(DuetArgs(), CPU_PROFILE, "cuda", 0, True, agree).backend == "none"
    assert calls == [("green-ctx", ())]


def test_ranks_that_agree_change_nothing(gpu_menu):
    agree, _ = _ranks(("green-ctx", (16, 48, 80, 112)))
    alone = build_menu(DuetArgs(decode_graph_sizes=4), CPU_PROFILE, "cuda", 0, True)
    gpu_menu.open.clear()
    both = build_menu(DuetArgs(decode_graph_sizes=4), CPU_PROFILE, "cuda", 0, True, agree)
    assert both.graph_sizes == alone.graph_sizes and both.sm_menu == alone.sm_menu
