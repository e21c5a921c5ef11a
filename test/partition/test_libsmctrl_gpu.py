"""libsmctrl TPC masks on a real GPU (only where the user installed a supported libsmctrl)."""

from __future__ import annotations

import pytest

from helpers.gpu import record_smids, smid_set
from sglang_duet.partition.libsmctrl import LibsmctrlBackend

pytestmark = pytest.mark.gpu


def test_masked_streams_are_disjoint(smid_kernel, num_sms, results):
    import torch

    backend = LibsmctrlBackend()
    ok, why = backend.available(0)
    if not ok:
        results["libsmctrl"] = {"skipped": why}
        pytest.skip(f"libsmctrl unavailable: {why}")
    decode = num_sms // 4 // 2 * 2
    pair = backend.create_pair(0, decode, 16)
    try:
        out_d = record_smids(smid_kernel, pair.decode_stream, num_sms)
        out_p = record_smids(smid_kernel, pair.prefill_stream, num_sms)
        smid_kernel.stream_synchronize(pair.decode_stream)
        smid_kernel.stream_synchronize(pair.prefill_stream)
        torch.cuda.synchronize()
        sd, sp = smid_set(out_d), smid_set(out_p)
    finally:
        pair.close()
    # NOTE: on Hopper the bits are physical TPC ids, so sizes may fall short of the nominal.
    results["libsmctrl"] = {"asked": decode, "measured": [len(sd), len(sp)]}
    assert not sd & sp
    assert len(sd) <= decode
