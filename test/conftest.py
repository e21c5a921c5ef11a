"""Shared pytest setup: markers, GPU auto-skip, shared real servers.

The import path (python/, the root, test/, test/sim/) is pytest's `pythonpath` option in
pyproject.toml: nothing here edits sys.path.
"""

from __future__ import annotations

import os

import pytest

# Set to 1 by test/test_gpu_fixtures.py only: the gpu-marked tests are then not skipped, so that
# `pytest --setup-plan` resolves their fixtures on a CPU machine (nothing runs under that option).
ASSUME_CUDA_ENV = "SGLANG_DUET_TEST_ASSUME_CUDA"


def _has_cuda() -> bool:
    if os.environ.get(ASSUME_CUDA_ENV) == "1":
        return True
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    # a test that ends a shared server runs after every other test, so that it is its last user
    items.sort(key=lambda item: item.get_closest_marker("ends_server") is not None)
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


# ---- sgl-duet-kernel (partition and kernel tests) ------------------------------------------


@pytest.fixture(scope="session")
def kernel():
    """The sgl_duet_kernel module (skips where it is not installed). Session-scoped so that a
    module- or session-scoped fixture may request it (test_phases_gpu.py's `menu` does)."""
    return pytest.importorskip("sgl_duet_kernel", reason="sgl-duet-kernel is not installed")


@pytest.fixture
def no_driver(kernel):
    """Skips the test on machines where libcuda.so.1 opens (they are not 'CPU machines')."""
    try:
        kernel.open_driver()
    except kernel.DriverUnavailable:
        return kernel
    pytest.skip("a CUDA driver is present: CPU-machine expectations do not apply")


# ---- real servers: one per configuration for the whole session (helpers/shared_servers.py) ----

CHUNK = 64  # small chunked-prefill size so that test prompts get chunked
# no CUDA-coredump wait in a stock server (sglang-duet's CPU settings do the same): a crash ends
# it in seconds
STOCK_ENV = {"SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "false"}


def _server(request, args, stock=False, env=None):
    from helpers.server import Server

    srv = Server(args, stock=stock, env=dict(env or {})).start()
    request.addfinalizer(srv.stop)
    return srv


def _duet(*args: str):
    from helpers.server import Server

    return lambda: Server(["--chunked-prefill-size", str(CHUNK), *args])


def _stock_llguidance():
    from helpers.server import Server
    from sglang_duet.tiny_model import default_model_path

    return Server(["--model-path", str(default_model_path()), "--chunked-prefill-size",
                   str(CHUNK), "--grammar-backend", "llguidance"], stock=True, env=STOCK_ENV)


API_KEY, ADMIN_API_KEY = "sk-duet-normal-5f3a9c", "sk-duet-admin-8e1b7d"


def _keyed(stock: bool, admin: bool):
    """A server with --api-key (and --admin-api-key when `admin`), metrics on; the keys are its
    `.api_key` and `.admin_api_key` (None when not set), and `.keys` both strings (the admin
    one is a key that server does not know when it has none)."""
    from helpers.server import Server
    from sglang_duet.tiny_model import default_model_path

    def config():
        keys = ["--api-key", API_KEY] + (["--admin-api-key", ADMIN_API_KEY] if admin else [])
        model = ["--model-path", str(default_model_path())] if stock else []
        srv = Server([*model, "--chunked-prefill-size", str(CHUNK), "--enable-metrics", *keys],
                     stock=stock, env=STOCK_ENV if stock else {})
        srv.api_key, srv.admin_api_key = API_KEY, ADMIN_API_KEY if admin else None
        srv.keys = (API_KEY, ADMIN_API_KEY)
        return srv

    return config


def _tp2(plans: str):
    from helpers.server import Server

    srv = Server(["--chunked-prefill-size", str(CHUNK), "--tp-size", "2", "--duet-mode",
                  "spatial", "--duet-plan-log", f"{plans}/plan"])
    srv.plan_log = f"{plans}/plan"
    return srv


def _sized(plans: str):
    from helpers.server import Server

    srv = Server(["--chunked-prefill-size", str(CHUNK), "--duet-tbt-slo-ms", "2.4",
                  "--no-duet-online-correction", "--duet-max-lookahead", "2",
                  "--duet-plan-log", f"{plans}/plan"])
    srv.plan_log = f"{plans}/plan"
    return srv


def _shared_configs():
    from helpers.shared_servers import with_temp_dir

    return {  # fixture name -> its server (each fixture's docstring says what it is)
        "duet_server": _duet("--enable-metrics"),
        "stock_server": _stock_llguidance,
        "spatial_server": _duet("--duet-mode", "spatial", "--duet-max-lookahead", "4",
                                "--enable-metrics"),
        "tp2_server": with_temp_dir(_tp2),
        # --mem-fraction-static: SGLang's start-up check compares the weights with the memory
        # available now; on a shared CPU machine 0.05 (the CPU default) can fail it
        "dp_server": _duet("--dp-size", "2", "--enable-metrics", "--mem-fraction-static", "0.3"),
        "gateway_worker": _duet("--enable-metrics", "--mem-fraction-static", "0.3"),
        "tiny_slo_server": _duet("--enable-metrics", "--duet-tbt-slo-ms", "0.3",
                                 "--no-duet-online-correction"),
        "sized_server": with_temp_dir(_sized),
        "keys_server": _keyed(stock=False, admin=False),
        "admin_keys_server": _keyed(stock=False, admin=True),
        "stock_keys_server": _keyed(stock=True, admin=False),
        "stock_admin_keys_server": _keyed(stock=True, admin=True),
    }


SHARED = pytest.StashKey()


def pytest_configure(config):
    from helpers.shared_servers import SharedServers

    config.stash[SHARED] = SharedServers(_shared_configs())


def pytest_collection_finish(session):
    session.config.stash[SHARED].plan_uses(session.items)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    shared = item.config.stash[SHARED]
    shared.current = tuple(item.fixturenames)
    shared.prestart(item.nodeid)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    item.config.stash[SHARED].done_with(item.nodeid)


def pytest_sessionfinish(session):
    session.config.stash[SHARED].stop_all()


def _get(request, name: str):
    return request.config.stash[SHARED].get(name)


@pytest.fixture(scope="session")
def duet_server(request):
    """sglang-duet on the embedded model, default duet flags (adaptive, SLO 100 ms)."""
    return _get(request, "duet_server")


@pytest.fixture(scope="session")
def spatial_server(request):
    """Forced spatial mode with look-ahead 4."""
    return _get(request, "spatial_server")


@pytest.fixture(scope="session")
def tp2_server(request):
    """TP=2 on the CPU (gloo), every plan logged per rank (`.plan_log`)."""
    return _get(request, "tp2_server")


@pytest.fixture(scope="session")
def dp_server(request):
    """--dp-size 2 with the duet router, metrics on."""
    return _get(request, "dp_server")


@pytest.fixture(scope="session")
def gateway_worker(request):
    """A second worker of duet_server's configuration for the gateway tests, which kill it."""
    return _get(request, "gateway_worker")


@pytest.fixture(scope="session")
def tiny_slo_server(request):
    """tau 0.3 ms: on the CPU profile a few decodes alone meet it, a 64-token chunk mixed in
    breaks it (see sglang_duet.runtime.components.CPU_PROFILE); metrics on."""
    return _get(request, "tiny_slo_server")


@pytest.fixture(scope="session")
def sized_server(request):
    """tau 2.4 ms (2.16 ms planned), look-ahead 2, every plan logged (`.plan_log`): one or two
    decodes alone meet it, a 64-token chunk mixed in does not, and no split does either: 13-19
    prompt tokens fit (policy/sized.py)."""
    return _get(request, "sized_server")


@pytest.fixture(scope="session")
def stock_server(request):
    """Stock `python -m sglang.launch_server` on the same embedded model and chunk size, with
    --grammar-backend llguidance: its default, xgrammar, cannot run without CUDA, and llguidance
    is sglang-duet's CPU default. The stock baseline for greedy tokens, constrained decoding and
    bad requests (#24). A test whose request kills it is marked `ends_server`, so it runs last.
    """
    return _get(request, "stock_server")


@pytest.fixture(scope="session")
def keys_server(request):
    """sglang-duet with --api-key (`.api_key`), metrics on (#51)."""
    return _get(request, "keys_server")


@pytest.fixture(scope="session")
def admin_keys_server(request):
    """sglang-duet with --api-key and --admin-api-key (`.api_key`, `.admin_api_key`), metrics
    on (#51)."""
    return _get(request, "admin_keys_server")


@pytest.fixture(scope="session")
def stock_keys_server(request):
    """Stock SGLang with keys_server's --api-key and flags: the auth baseline (#51)."""
    return _get(request, "stock_keys_server")


@pytest.fixture(scope="session")
def stock_admin_keys_server(request):
    """Stock SGLang with admin_keys_server's keys and flags: the auth baseline (#51)."""
    return _get(request, "stock_admin_keys_server")


@pytest.fixture
def fresh_server(request):
    """Factory for a server a test may end (a request that kills stock SGLang, a drain):
    `fresh_server(args, stock=False)`; every server it started is stopped at teardown. A stock
    one gets the model path and no CUDA-coredump wait (the same as sglang-duet's CPU setting),
    so that a crash ends it in seconds."""
    from sglang_duet.tiny_model import default_model_path

    def start(args, stock=False):
        extra = ["--model-path", str(default_model_path())] if stock else []
        env = STOCK_ENV if stock else None
        return _server(request, [*extra, "--chunked-prefill-size", str(CHUNK), *args],
                       stock=stock, env=env)

    return start


# ---- the latency model (latency, calibrate, policy tests) -----------------------------------


@pytest.fixture(scope="session")
def make_lm():
    """Factory: make_lm(model="qwen3-8b", hardware="h100-sxm", tp=1, calibration=None)."""
    from sglang_duet.latency import LatencyModel, get_hardware, get_model

    def make(model: str = "qwen3-8b", hardware: str = "h100-sxm", tp: int = 1, calibration=None):
        return LatencyModel(get_hardware(hardware), get_model(model, tp), calibration)

    return make
