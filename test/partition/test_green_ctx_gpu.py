"""Green-context partitions on a real GPU: disjoint SM sets of the requested sizes, graphs."""

from __future__ import annotations

import pytest

from helpers.gpu import record_smids, smid_set
from sglang_duet.partition import PartitionMenu
from sglang_duet.partition.green_ctx import GreenCtxBackend

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def green(smid_kernel):
    ok, why = GreenCtxBackend().available(0)
    if not ok:
        pytest.skip(f"green-ctx unavailable: {why}")
    return smid_kernel


def _sizes(k, total):
    g = k.green_granularity(0)
    smallest = max(g.min_sms, 16)
    smallest += (-(smallest - g.min_sms)) % g.align_sms
    largest = smallest + (total - 16 - smallest) // g.align_sms * g.align_sms
    middle = smallest + (largest - smallest) // 2 // g.align_sms * g.align_sms
    return g, sorted({smallest, middle, largest})


def pair_smids(green, pair, num_sms: int) -> tuple[set[int], set[int]]:
    """SM ids the pair's decode and prefill streams' blocks ran on (both streams synchronised)."""
    import torch

    out_d = record_smids(green, pair.decode_stream, num_sms)
    out_p = record_smids(green, pair.prefill_stream, num_sms)
    torch.cuda.synchronize()
    green.stream_synchronize(pair.decode_stream)
    green.stream_synchronize(pair.prefill_stream)
    return smid_set(out_d), smid_set(out_p)


def test_pairs_are_disjoint_and_sized(green, num_sms, results):
    g, sizes = _sizes(green, num_sms)
    results["granularity"] = g._asdict()
    rows = []
    for decode in sizes:
        with green.GreenPair(0, decode, 8) as pair:
            sd, sp = pair_smids(green, pair, num_sms)
            rows.append(
                {
                    "asked": decode,
                    "granted": [pair.decode_sms, pair.prefill_sms],
                    "measured": [len(sd), len(sp)],
                    "overlap": len(sd & sp),
                }
            )
            assert pair.decode_sms == decode
            assert not sd & sp, f"decode and prefill shared SMs {sorted(sd & sp)}"
            assert len(sd) == decode, f"decode ran on {len(sd)} SMs, asked {decode}"
            assert len(sp) == pair.prefill_sms
            assert sd | sp <= set(range(num_sms))
    results["green_pairs"] = rows


def test_finer_split_flag(green, num_sms, results):
    """Records what SPLIT_IGNORE_SM_COSCHEDULING allows (informative; asserts only sanity)."""
    flag = green.SPLIT_IGNORE_SM_COSCHEDULING
    try:
        g = green.green_granularity(0, flag)
    except green.KernelError as exc:
        results["ignore_coscheduling"] = {"error": str(exc)}
        pytest.skip(f"driver refused the flag: {exc}")
    entry: dict[str, object] = {"granularity": g._asdict()}
    decode = max(g.min_sms, 2) + g.align_sms  # smallest size above the minimum
    with green.GreenPair(0, decode, 8, flag) as pair:
        sd, sp = pair_smids(green, pair, num_sms)
        entry.update(
            asked=decode,
            granted=[pair.decode_sms, pair.prefill_sms],
            measured=[len(sd), len(sp)],
            overlap=len(sd & sp),
        )
    results["ignore_coscheduling"] = entry
    assert not sd & sp


def test_graph_captured_on_partition_stays_there(green, num_sms, results):
    """Driver-level capture on the decode stream, replay launched from a primary-ctx stream."""
    import torch

    decode = 32 if num_sms > 64 else 16
    plain = green.stream_create(0)
    try:
        with green.GreenPair(0, decode, 8) as pair:
            eager = record_smids(green, pair.decode_stream, num_sms)
            green.stream_synchronize(pair.decode_stream)
            sd = smid_set(eager)
            out = torch.full((4 * num_sms,), -1, dtype=torch.int32, device="cuda")
            torch.cuda.synchronize()
            green.smid_record_graph(pair.decode_stream, plain, out.data_ptr(), out.numel(), 200_000)
            replay = smid_set(out)
    finally:
        green.stream_destroy(0, plain)
    results["graph_driver"] = {
        "decode": decode,
        "eager": len(sd),
        "replay": len(replay),
        "replay_outside_decode": len(replay - sd),
    }
    assert replay <= sd, f"replayed graph left the partition: {sorted(replay - sd)}"
    assert len(replay) == decode


def test_torch_graph_on_menu_stream(green, num_sms, results):
    """torch.cuda.graph captured on a PartitionMenu stream, replayed on the default stream."""
    import torch

    menu = PartitionMenu.build(GreenCtxBackend(), 0, min_decode=16, min_prefill=16)
    try:
        decode = menu.decode_sizes[0]
        ds, ps = menu.streams(decode)
        assert ds.cuda_stream == menu.raw_streams(decode)[0]
        eager = record_smids(green, ds.cuda_stream, num_sms)
        ds.synchronize()
        sd = smid_set(eager)
        out = torch.full((4 * num_sms,), -1, dtype=torch.int32, device="cuda")
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=ds, capture_error_mode="thread_local"):
            green.smid_record(
                torch.cuda.current_stream().cuda_stream, out.data_ptr(), out.numel(), 200_000
            )
        out.fill_(-1)
        torch.cuda.synchronize()
        graph.replay()  # launched on the current (default, full-device) stream
        torch.cuda.synchronize()
        replay = smid_set(out)
        results["graph_torch"] = {
            "decode": decode,
            "eager": len(sd),
            "replay": len(replay),
            "replay_outside_decode": len(replay - sd),
            "menu": list(menu.decode_sizes),
        }
        assert replay <= sd
        assert len(sd) == decode
        # a torch op on the prefill stream runs there too (smoke: result is right)
        with torch.cuda.stream(ps):
            x = torch.ones(1 << 20, device="cuda")
            y = (x * 2).sum()
        ps.synchronize()
        assert y.item() == 2 * (1 << 20)
    finally:
        torch.cuda.synchronize()
        menu.close()
