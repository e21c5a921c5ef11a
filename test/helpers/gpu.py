"""GPU-test helpers: the smid probe and a results sink for benchmark/gpu/check.sh.

The `gpu`-marked tests sit beside their package's tests (test/partition, test/runtime) and import
the fixtures from here. Several modules share the results file, so each merges its keys in.
"""

from __future__ import annotations

import json
import os

import pytest

RESULTS_ENV = "SGLANG_DUET_RESULTS_DIR"  # check.sh sets it; results land in <dir>/<name>.json


@pytest.fixture(scope="session")
def results():
    """Dict the tests fill with measurements; written to $SGLANG_DUET_RESULTS_DIR at the end."""
    data: dict[str, object] = {}
    yield data
    out = os.environ.get(RESULTS_ENV)
    if out and data:
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, "partition_smids.json")
        merged = {}
        if os.path.exists(path):
            with open(path) as f:
                merged = json.load(f)
        merged.update(data)
        with open(path, "w") as f:
            json.dump(merged, f, indent=1, sort_keys=True)


@pytest.fixture(scope="session")
def smid_kernel():
    k = pytest.importorskip("sgl_duet_kernel", reason="sgl-duet-kernel is not installed")
    if not k.smid_available():
        pytest.skip("sgl_duet_kernel was built without the smid kernel (no nvcc)")
    return k


@pytest.fixture(scope="session")
def num_sms():
    import torch

    return torch.cuda.get_device_properties(0).multi_processor_count


def record_smids(kernel, stream: int, num_sms: int, spin_ns: int = 200_000):
    """Launches 4 blocks per device SM on `stream` and returns the device buffer (async)."""
    import torch

    out = torch.full((4 * num_sms,), -1, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    kernel.smid_record(stream, out.data_ptr(), out.numel(), spin_ns)
    return out


def smid_set(out) -> set[int]:
    values = out.cpu().tolist()
    assert -1 not in values, "some blocks never wrote their SM id"
    return set(values)
