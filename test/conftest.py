"""Shared pytest setup: markers, GPU auto-skip, shared real servers.

The import path (python/, the root, test/, test/sim/) is pytest's `pythonpath` option in
pyproject.toml: nothing here edits sys.path.
"""

from __future__ import annotations

import pytest


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


# ---- sgl-duet-kernel (partition and kernel tests) ------------------------------------------


@pytest.fixture
def kernel():
    return pytest.importorskip("sgl_duet_kernel", reason="sgl-duet-kernel is not installed")


@pytest.fixture
def no_driver(kernel):
    """Skips the test on machines where libcuda.so.1 opens (they are not 'CPU machines')."""
    try:
        kernel.open_driver()
    except kernel.DriverUnavailable:
        return kernel
    pytest.skip("a CUDA driver is present: CPU-machine expectations do not apply")


# ---- real servers (started lazily, one per test module; idle ones sleep) ----------------

CHUNK = 64  # small chunked-prefill size so that test prompts get chunked


def _server(request, args, stock=False):
    from helpers.server import Server

    srv = Server(args, stock=stock).start()
    request.addfinalizer(srv.stop)
    return srv


@pytest.fixture(scope="module")
def duet_server(request):
    """sglang-duet on the embedded model, default duet flags (adaptive, SLO 100 ms)."""
    return _server(request, ["--chunked-prefill-size", str(CHUNK), "--enable-metrics"])


@pytest.fixture(scope="module")
def stock_server(request):
    """Stock `python -m sglang.launch_server` on the same embedded model and chunk size."""
    from sglang_duet.tiny_model import default_model_path

    return _server(
        request,
        ["--model-path", str(default_model_path()), "--chunked-prefill-size", str(CHUNK)],
        stock=True,
    )


@pytest.fixture(scope="module")
def spatial_server(request):
    """Forced spatial mode with look-ahead 4."""
    return _server(
        request,
        ["--chunked-prefill-size", str(CHUNK), "--duet-mode", "spatial",
         "--duet-max-lookahead", "4", "--enable-metrics"],
    )


@pytest.fixture(scope="module")
def tp2_server(request, tmp_path_factory):
    """TP=2 on the CPU (gloo), every plan logged per rank."""
    log = tmp_path_factory.mktemp("plans") / "plan"
    srv = _server(request, ["--chunked-prefill-size", str(CHUNK), "--tp-size", "2",
                            "--duet-mode", "spatial", "--duet-plan-log", str(log)])
    srv.plan_log = str(log)
    return srv


# ---- the latency model (latency, calibrate, policy tests) -----------------------------------


@pytest.fixture(scope="session")
def make_lm():
    """Factory: make_lm(model="qwen3-8b", hardware="h100-sxm", tp=1, calibration=None)."""
    from sglang_duet.latency import LatencyModel, get_hardware, get_model

    def make(model: str = "qwen3-8b", hardware: str = "h100-sxm", tp: int = 1, calibration=None):
        return LatencyModel(get_hardware(hardware), get_model(model, tp), calibration)

    return make
