"""Every HTTP route of SGLang's app, with its methods and auth level, and what SGLang's own API-key
middleware decides for a request to it: the baseline of the auth tests (#51)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Mounted at start-up with --enable-metrics (not an app route at import time).
MOUNTS = ("/metrics",)


@dataclass(frozen=True)
class Route:
    path: str  # concrete: path parameters filled in
    method: str
    # the sglang.srt.utils.auth.AuthLevel value SGLang's API-key middleware applies to it: its
    # own route lookup, which sees the app's top-level routes only (so the admin routes of an
    # included router, /scale_elastic_ep and /is_scaling_elastic_ep, count as normal)
    level: str


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", path)


def app_routes(app: Any) -> list[Route]:
    """Every (path, method) of `app`'s HTTP routes, the routers it includes and MOUNTS."""
    out: list[Route] = []

    def walk(routes: Any) -> None:
        for r in routes:
            inner = getattr(r, "original_router", None)  # an included router
            if inner is not None:
                walk(inner.routes)
                continue
            methods = getattr(r, "methods", None)
            if not methods:  # websockets
                continue
            for m in sorted(methods):
                out.append(Route(concrete(r.path), m, auth_level(app, concrete(r.path), m)))

    walk(app.router.routes)
    out += [Route(p, "GET", auth_level(app, p, "GET")) for p in MOUNTS]
    return sorted(set(out), key=lambda r: (r.path, r.method))


def auth_level(app: Any, path: str, method: str) -> str:
    from sglang.srt.utils.auth import _get_auth_level_from_app_and_scope

    scope = {"type": "http", "path": path, "method": method, "root_path": "",
             "path_params": {}, "query_string": b"", "headers": []}
    return _get_auth_level_from_app_and_scope(app, scope).value


def stock_decision(route: Route, authorization: str | None, api_key: str | None,
                   admin_api_key: str | None) -> int | None:
    """The status SGLang's API-key middleware answers `route` with (401 or 403), or None when it
    lets the request through: SGLang's own decision function, on the level it applies."""
    from sglang.srt.utils.auth import AuthLevel, decide_request_auth

    d = decide_request_auth(method=route.method, path=route.path,
                            authorization_header=authorization, api_key=api_key,
                            admin_api_key=admin_api_key, auth_level=AuthLevel(route.level))
    return None if d.allowed else d.error_status_code
