"""A split the driver refuses on a real GPU: the refusal names that size only, and the backend
still grants the next size (issue #47, review item 8: a refused size must drop that size, not
every partition). Run by the GPU check's gpu_tests step; prints what the driver did."""

from __future__ import annotations

import pytest

from sglang_duet.partition import PartitionError
from sglang_duet.partition.green_ctx import GreenCtxBackend

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def backend(kernel):
    b = GreenCtxBackend()
    ok, why = b.available(0)
    if not ok:
        pytest.skip(f"green-ctx unavailable: {why}")
    return b


def test_a_refused_size_leaves_the_backend_usable(backend):
    total = backend.num_sms(0)
    g = backend.granularity(0)
    # every SM to decode leaves the prefill side none: the driver or our check must refuse it
    with pytest.raises(PartitionError) as refused:
        backend.create_pair(0, total, 16)
    # ... and a size that fits is still granted afterwards, on disjoint counts
    smallest = max(g.min_sms, 16)
    smallest += (-(smallest - g.min_sms)) % g.step_sms
    pair = backend.create_pair(0, smallest, 16)
    try:
        assert pair.decode_sms >= smallest and pair.prefill_sms >= 16
        assert pair.decode_sms + pair.prefill_sms <= total
    finally:
        pair.close()
    print(f"refused split: decode {total} of {total} SMs -> {refused.value}; "
          f"then decode {smallest} granted as {pair.decode_sms}/{pair.prefill_sms}")
