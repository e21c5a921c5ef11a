"""The auth matrix (#51 items 1, 4, 5) on real servers: every route of SGLang's app (its included
routers and the /metrics mount too) x five keys (none, a wrong one, the key without "Bearer",
the normal key, the admin key) x both key setups (--api-key alone; with --admin-api-key), sent
to sglang-duet and to stock SGLang with the same flags.

Asserted: stock answers what SGLang's own auth function decides; sglang-duet refuses every
request stock refuses, with stock's status and its auth middleware's own body (so nothing behind
it ran); a request the auth lets through is harmless anyway (a body method carries invalid JSON,
which sglang-duet answers 400 before the app; of the other methods only the read-only GET routes
are sent, and `test_control_routes.py` runs the rest); and no sglang-duet answer carries either
key, where stock's /server_info hands the admin key to the normal key. Also: the
torch.distributed store of --nccl-port listens on 127.0.0.1 only (stock: every interface)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import requests

from helpers.net import listening

from .routes import Route, app_routes, stock_decision

pytestmark = pytest.mark.server

VARIANTS = ("none", "wrong", "no_bearer", "normal", "admin")
BODY_METHODS = ("POST", "PUT", "PATCH")
BAD_JSON = b"{"
AUTH_BODIES = {401: {"error": "Unauthorized"}, 403: {"error": "Forbidden"}}


@pytest.fixture(scope="module")
def routes() -> list[Route]:
    from sglang.srt.entrypoints.http_server import app

    return app_routes(app)


def authorization(variant: str, keys: tuple[str, str]) -> str | None:
    normal, admin = keys
    return {"none": None, "wrong": "Bearer sk-wrong-0000000", "no_bearer": normal,
            "normal": f"Bearer {normal}", "admin": f"Bearer {admin}"}[variant]


def read_only(routes: list[Route]) -> set[str]:
    """Paths whose every method is GET or HEAD: queries, harmless to run."""
    methods: dict[str, set[str]] = {}
    for r in routes:
        methods.setdefault(r.path, set()).add(r.method)
    return {p for p, ms in methods.items() if ms <= {"GET", "HEAD"}}


@dataclass
class Case:
    route: Route
    variant: str
    expected: int | None  # SGLang's auth decision: 401, 403, or None (let through)


def cases(routes: list[Route], srv, stock: bool) -> list[Case]:
    """What is sent: every request the auth refuses; of those it lets through, body methods
    (to sglang-duet only, with invalid JSON) and read-only GETs."""
    safe = read_only(routes)
    out = []
    for route in routes:
        for variant in VARIANTS:
            expected = stock_decision(route, authorization(variant, srv.keys), srv.api_key,
                                      srv.admin_api_key)
            sent = (expected is not None or (route.method in BODY_METHODS and not stock)
                    or (route.method in ("GET", "HEAD") and route.path in safe))
            if sent:
                out.append(Case(route, variant, expected))
    return out


def send(session: requests.Session, srv, case: Case) -> requests.Response:
    auth = authorization(case.variant, srv.keys)
    headers = {"Authorization": auth} if auth else {}
    data = None
    if case.route.method in BODY_METHODS:
        headers["Content-Type"] = "application/json"
        data = BAD_JSON
    return session.request(case.route.method, srv.url + case.route.path, data=data,
                           headers=headers, timeout=60, allow_redirects=False)


def run_matrix(srv, routes: list[Route], stock: bool) -> dict[tuple, tuple]:
    """(route, variant) -> (its Case, the answer)."""
    with requests.Session() as session:
        return {(c.route, c.variant): (c, send(session, srv, c))
                for c in cases(routes, srv, stock)}


def body(r: requests.Response):
    try:
        return r.json() if r.content else None
    except ValueError:
        return r.text


def refused(status: int) -> int | None:
    return status if status in (401, 403) else None


def check(duet, stock, routes: list[Route]) -> None:
    got_stock = run_matrix(stock, routes, stock=True)
    got_duet = run_matrix(duet, routes, stock=False)
    wrong_stock = [(c.route, c.variant, c.expected, r.status_code)
                   for c, r in got_stock.values() if refused(r.status_code) != c.expected]
    assert not wrong_stock, wrong_stock[:20]  # stock is what SGLang's auth function says
    weaker, ran, leaks = [], [], []
    for key, (c, r) in got_duet.items():
        stock_status = got_stock[key][1].status_code if key in got_stock else c.expected
        if refused(stock_status) and refused(r.status_code) != refused(stock_status):
            weaker.append((c.route, c.variant, stock_status, r.status_code))
        if refused(r.status_code):  # SGLang's auth answered, nothing behind it ran
            if body(r) != (None if c.route.method == "HEAD" else AUTH_BODIES[r.status_code]):
                ran.append((c.route, c.variant, r.status_code, r.text[:100]))
        elif c.route.method in BODY_METHODS and not (
                r.status_code in (400, 405) and (body(r) or {}).get("object") == "error"):
            ran.append((c.route, c.variant, r.status_code, r.text[:100]))
        if any(k.encode() in r.content for k in duet.keys):
            leaks.append((c.route, c.variant))
    assert not weaker, weaker[:20]
    assert not ran, ran[:20]
    assert not leaks, leaks[:20]
    assert len(got_duet) >= 5 * len({r.path for r in routes})  # every route, each key


def test_matrix_with_api_key(keys_server, stock_keys_server, routes):
    check(keys_server, stock_keys_server, routes)


def test_health_is_get_and_head_only(keys_server, stock_keys_server):
    big = b"x" * (20 << 20)
    for srv in (keys_server, stock_keys_server):
        r = requests.post(srv.url + "/health", data=big, timeout=120)
        assert r.status_code == 405, (srv.stock, r.status_code)
    r = requests.post(keys_server.url + "/health", data=big, timeout=120)
    assert r.headers["allow"] == "GET, HEAD" and "GET and HEAD" in json.loads(r.text)["message"]
    assert requests.head(keys_server.url + "/health", timeout=60).status_code == 200
    assert requests.get(keys_server.url + "/health", timeout=60).status_code == 200


def test_the_store_port_listens_on_loopback_only(keys_server, stock_keys_server):
    assert listening(keys_server.nccl_port) == {"127.0.0.1"}
    assert listening(stock_keys_server.nccl_port) & {"0.0.0.0", "::"}  # stock: every interface


def test_matrix_with_api_key_and_admin_api_key(admin_keys_server, stock_admin_keys_server,
                                               routes):
    check(admin_keys_server, stock_admin_keys_server, routes)


def server_info(srv) -> requests.Response:
    return requests.get(srv.url + "/server_info", timeout=60,
                        headers={"Authorization": f"Bearer {srv.api_key}"})


def test_the_normal_key_cannot_read_the_admin_key(admin_keys_server, stock_admin_keys_server):
    for path in ("/server_info", "/get_server_info"):
        r = requests.get(admin_keys_server.url + path, timeout=60,
                         headers={"Authorization": f"Bearer {admin_keys_server.api_key}"})
        info = r.json()
        assert r.status_code == 200 and info["api_key"] == info["admin_api_key"] == "<redacted>"
        assert info["internal_states"][0]["admin_api_key"] == "<redacted>"
        assert info["port"] == admin_keys_server.port  # the rest is reported as before
        flush = requests.post(admin_keys_server.url + "/flush_cache", timeout=60,
                              headers={"Authorization": f"Bearer {info['admin_api_key']}"})
        assert flush.status_code == 401
    # stock hands it over, and with it /flush_cache opens: the behaviour this replaces
    leaked = server_info(stock_admin_keys_server).json()["admin_api_key"]
    assert leaked == stock_admin_keys_server.admin_api_key
    flush = requests.post(stock_admin_keys_server.url + "/flush_cache", timeout=60,
                          headers={"Authorization": f"Bearer {leaked}"})
    assert flush.status_code == 200
