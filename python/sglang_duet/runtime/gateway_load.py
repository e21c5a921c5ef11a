"""`GET /get_load` for SGLang's gateway (PyPI `sglang-router`, pinned in pyproject.toml).

The gateway's `power_of_two` policy (`sgl-model-gateway/src/policies/power_of_two.rs`) compares
loads that its `LoadMonitor` (`src/core/worker_manager.rs`, `WorkerManager::get_worker_load`)
polls every `--load-check-interval` seconds: `GET {worker}/get_load`, a JSON array with one object
per DP rank, summing the integer field `num_tokens`. SGLang's own handler reports KV tokens there.
Ours keeps SGLang's fields and puts the duet router's latency-model load in `num_tokens`, in
microseconds: the predicted time until a new full-chunk request's first token on that replica
(`DuetRouter.predicted_loads`), so the stock gateway balances on predicted latency unmodified.
SGLang's token count stays available as `sglang_num_tokens`; `duet_load_s` is the same load in
seconds.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from sglang_duet.router import DuetRouter
from sglang_duet.runtime.router_setup import router_context, snapshot_to_load

__all__ = ["install", "load_rows"]

logger = logging.getLogger(__name__)


def load_rows(router: DuetRouter, snapshots: list[Any], now: float) -> list[dict[str, Any]]:
    """The /get_load body for these SGLang load snapshots."""
    router.observe([snapshot_to_load(s) for s in snapshots], now)
    loads = router.predicted_loads()
    rows = []
    for s in snapshots:
        load_s = loads[int(s.dp_rank)] or 0.0
        rows.append({
            "dp_rank": s.dp_rank,
            "num_reqs": s.num_running_reqs + s.num_waiting_reqs,
            "num_waiting_reqs": s.num_waiting_reqs,
            "num_tokens": int(round(load_s * 1e6)),
            "num_pending_tokens": s.num_total_tokens - s.num_used_tokens,
            "sglang_num_tokens": s.num_total_tokens,
            "duet_load_s": round(load_s, 6),
            "ts_tic": now,
        })
    return rows


def install(app: Any, duet_args: dict[str, Any], server_args: Any) -> None:
    """Replace SGLang's /get_load route on `app` (SGLang's FastAPI app, in our launcher).

    The latency model is built on the first call, in the HTTP server after start-up (building it
    may query the GPU, which the launcher must not do before SGLang spawns its processes). If it
    cannot be built, /get_load answers as SGLang does and says why once in the log."""
    state: dict[str, Any] = {}
    app.router.routes[:] = [r for r in app.router.routes
                            if getattr(r, "path", None) != "/get_load"]

    def router() -> DuetRouter | None:
        if "router" not in state:
            try:
                ctx = dataclasses.replace(router_context(duet_args, server_args), refresh_s=0.0)
                state["router"] = DuetRouter(int(server_args.dp_size or 1), ctx)
            except Exception as e:  # noqa: BLE001 - any failure falls back to SGLang's load
                logger.warning("duet: /get_load reports SGLang's token load (%s)", e)
                state["router"] = None
        return state["router"]

    @app.get("/get_load")
    async def duet_get_load() -> list[dict[str, Any]]:
        from sglang.srt.entrypoints.http_server import _global_state

        snaps = await _global_state.tokenizer_manager.get_loads(include=["core"])
        r = router()
        if r is None:
            return [{"dp_rank": s.dp_rank, "num_reqs": s.num_running_reqs + s.num_waiting_reqs,
                     "num_waiting_reqs": s.num_waiting_reqs, "num_tokens": s.num_total_tokens}
                    for s in snaps]
        return load_rows(r, snaps, time.monotonic())
