"""One authorised request kills no server, on any route (#51 item 2): every route of SGLang's app
(admin and control ones above all: /stop_..., expert distribution, profiling, weights, cache,
pause/continue, internal state, LoRA, sessions, ...) gets a minimal request with the right key
on the tiny model, and must get an HTTP answer within a bound; after each, /health answers 200
and a generation works. A route that would leave the server stopped is followed at once by the
route that undoes it (`UNDO`); the only one not sent is GET /start_profile (`NOT_SENT`).

Stock SGLang dies of the first of these (/start_expert_distribution_record without
--expert-distribution-recorder-mode; the scheduler raises and the whole server exits):
sglang-duet answers 400 naming the flag, checked here too."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import types

import pytest
import requests

from sglang_duet.server.config import ServeArgs
from sglang_duet.server.install import NEEDS_FLAG, refusals
from sglang_duet.server.middleware import DuetMiddleware
from sglang_duet.server.state import ServerState

from .asgi import body_json, call
from .routes import Route, app_routes

ANSWER_S = 60.0  # the bound on each answer (a 2-core machine shared with other tests)
# Bodies that reach the handler with arguments that are valid in form but name nothing that
# exists here (the rest get `{}`, which SGLang's request models mostly refuse): the failure
# paths of the scheduler and the tokenizer manager are what is exercised.
BODIES = {
    "/update_weights_from_disk": {"model_path": "/nonexistent/model"},
    "/get_weights_by_name": {"name": "no.such.weight"},
    "/load_lora_adapter": {"lora_name": "x", "lora_path": "/nonexistent/lora"},
    "/unload_lora_adapter": {"lora_name": "x"},
    "/update_weight_version": {"new_version": "v-test", "abort_all_requests": False},
    "/set_internal_state": {"server_args": {"no_such_arg": 1}},
    "/slow_down": {"forward_sleep_time": None},
    "/open_session": {"capacity_of_str_len": 16},
    "/close_session": {"session_id": "no-such-session"},
    "/abort_request": {"rid": "no-such-request"},
    "/release_memory_occupation": {"tags": ["kv_cache"]},
    "/resume_memory_occupation": {"tags": ["kv_cache"]},
}
# Sent right after the route that needs it, before the health check.
UNDO = {
    "/pause_generation": ("/continue_generation", {}),
    "/release_memory_occupation": ("/resume_memory_occupation", BODIES[
        "/resume_memory_occupation"]),
    "/start_profile": ("/stop_profile", {}),
}
NOT_SENT = {
    ("/start_profile", "GET"): "the same handler as POST, which is sent (with an output_dir "
                               "that is removed afterwards); a GET would write its trace to "
                               "the server's default directory",
}
BODY_METHODS = ("POST", "PUT", "PATCH")


def test_refusals_name_the_flag():
    refused = refusals(types.SimpleNamespace(expert_distribution_recorder_mode=None,
                                             enable_memory_saver=False))
    assert set(refused) == set(NEEDS_FLAG)
    assert "--expert-distribution-recorder-mode" in refused["/start_expert_distribution_record"]
    assert "--enable-memory-saver" in refused["/resume_memory_occupation"]
    assert refusals(types.SimpleNamespace(expert_distribution_recorder_mode="stat",
                                          enable_memory_saver=True)) == {}


def test_the_middleware_answers_a_refused_route_with_400():
    async def app(scope, receive, send):  # pragma: no cover - must not be reached
        raise AssertionError("reached the app")

    state = ServerState()
    state.refused = refusals(types.SimpleNamespace(expert_distribution_recorder_mode=None,
                                                   enable_memory_saver=False))
    for method in ("GET", "POST"):
        out = asyncio.run(call(DuetMiddleware(app, ServeArgs(), state, {}),
                               "/start_expert_distribution_record", b"{}", method=method))
        assert out["status"] == 400
        assert body_json(out)["type"] == "BadRequestError"


def key_for(srv, route: Route) -> str:
    return srv.admin_api_key if route.level != "normal" else srv.api_key


def request(srv, route: Route, body=None) -> requests.Response:
    """`route` with its key; the body (JSON) for the methods that carry one."""
    kw = {"json": body if body is not None else {}} if route.method in BODY_METHODS else {}
    return requests.request(route.method, srv.url + route.path, timeout=ANSWER_S,
                            headers={"Authorization": f"Bearer {key_for(srv, route)}"},
                            allow_redirects=False, **kw)


def healthy(srv) -> str | None:
    """None when the server serves; else what is wrong."""
    if srv.proc is not None and srv.proc.poll() is not None:
        return f"exited with {srv.proc.returncode}"
    h = requests.get(srv.url + "/health", timeout=ANSWER_S)
    if h.status_code != 200:
        return f"/health {h.status_code}"
    g = requests.post(srv.url + "/generate", timeout=ANSWER_S,
                      headers={"Authorization": f"Bearer {srv.api_key}"},
                      json={"input_ids": [5, 6], "sampling_params": {
                          "max_new_tokens": 2, "temperature": 0.0, "ignore_eos": True}})
    if g.status_code != 200 or len(g.json()["output_ids"]) != 2:
        return f"/generate {g.status_code} {g.text[:200]}"
    return None


@pytest.mark.server
def test_no_authorised_request_kills_the_server(admin_keys_server):
    from sglang.srt.entrypoints.http_server import app

    srv = admin_keys_server
    routes = [r for r in app_routes(app) if (r.path, r.method) not in NOT_SENT]
    assert {p for p, _ in NOT_SENT} <= {r.path for r in app_routes(app)}
    undo_routes = {r.path: r for r in routes if r.path in {p for p, _ in UNDO.values()}}
    trace_dir = tempfile.mkdtemp(prefix="duet_profile_")
    bodies = {**BODIES, "/start_profile": {"output_dir": trace_dir, "num_steps": 1}}
    failures, answers = [], {}
    try:
        for route in routes:
            try:
                r = request(srv, route, bodies.get(route.path))
                answers[route] = r.status_code
                if route.path in UNDO:
                    path, body = UNDO[route.path]
                    undo = request(srv, undo_routes[path], body)
                    answers[Route(path, "undo", "")] = undo.status_code
            except requests.RequestException as e:
                failures.append((route, f"no answer: {e!r}"))
            problem = healthy(srv)
            if problem is not None:
                failures.append((route, problem))
                break  # the rest would fail for the same reason
    finally:
        shutil.rmtree(trace_dir, ignore_errors=True)
    assert not failures, (failures, srv.log())
    expert = Route("/start_expert_distribution_record", "POST", "admin_optional")
    assert answers[expert] == 400  # stock: the server exits
    assert len(answers) >= len(routes)


@pytest.mark.server
@pytest.mark.ends_server
def test_stock_dies_of_start_expert_distribution_record(stock_keys_server):
    """What the 400 above replaces, re-run on stock SGLang on every CI run (its last user: the
    request ends it)."""
    stock = stock_keys_server
    try:
        answered = requests.post(stock.url + "/start_expert_distribution_record", timeout=120,
                                 headers={"Authorization": f"Bearer {stock.api_key}"}).status_code
    except requests.RequestException:
        answered = None
    assert answered in (None, 500, 503)
    stock.proc.wait(timeout=90)
    assert stock.proc.returncode != 0
    assert "expert_distribution_recorder_mode" in stock.log(tail=0)
