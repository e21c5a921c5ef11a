"""The duet router: send a request where its first token is predicted soonest without pushing
that replica's decodes past tau.

Per replica, from its last report (decoding requests n, their KV tokens, queued prompt tokens Q),
the latency model predicts:

* t_mix: one iteration of a full prompt chunk (token budget B) with the n decodes. Prefill
  progresses at rate = B / t_mix tokens per second under that decode load, so a new request of
  p prompt tokens gets its first token after about (Q + p) / rate seconds (its *wait*, also the
  replica's load figure: seconds of queued prefill work). The mode the replica is predicted to run
  in is aggregated when t_mix <= tau, else spatial (DuetServe splits the SMs).
* t_join: one decode step of the n + 1 requests once this one decodes there (its context added).
  A replica where t_join > tau, or whose KV pool cannot hold the request, is a last resort.

The predictions depend on n and the KV tokens only, so they are made once per report that
changes them (at most every `refresh_s`), and a dispatch is arithmetic over the replicas. Ties on
the wait, and replicas that have not reported yet, fall back to least queued tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

from .base import Router, View
from .load import Decision

__all__ = ["DuetRouter"]

_PROBE_TOKENS = 1024  # context added to measure a decode step's cost per context token
_TIE = 1e-9  # waits closer than this (seconds) are a tie


class _Costs:
    """Predictions for one replica's decode state (seconds; rate in tokens/s)."""

    __slots__ = ("version", "rate", "aggregated", "join_s", "join_per_token_s", "mean_ctx")

    def __init__(self, version: int, rate: float, aggregated: bool, join_s: float,
                 join_per_token_s: float, mean_ctx: float) -> None:
        self.version, self.rate, self.aggregated = version, rate, aggregated
        self.join_s, self.join_per_token_s, self.mean_ctx = join_s, join_per_token_s, mean_ctx


class DuetRouter(Router):
    name = "duet"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.ctx.latency is None:
            raise ValueError("the duet router needs a latency model (RouterContext.latency)")
        from sglang_duet.latency import Batch

        self._batch = Batch
        self._chunk = Batch.prefill(self.ctx.token_budget)
        self._costs: list[_Costs | None] = [None] * len(self.views)

    def _predict(self, v: View) -> _Costs:
        c = self._costs[v.idx]
        if c is not None and c.version == v.version:
            return c
        lm, batch, tau = self.ctx.latency, self._batch, self.ctx.tbt_slo_s
        n = v.running
        mean = v.context_tokens // n if n else 0
        decode = batch.decode(n, mean)
        t_mix = lm.predict_union(decode, self._chunk).total_s  # type: ignore[union-attr]
        join = lm.predict(batch.decode(n + 1, mean)).total_s  # type: ignore[union-attr]
        probe = lm.predict(batch.decode(n + 1, mean + _PROBE_TOKENS)).total_s  # type: ignore
        per_token = max(probe - join, 0.0) / (_PROBE_TOKENS * (n + 1))
        c = _Costs(v.version, self.ctx.token_budget / t_mix, t_mix <= tau, join, per_token, mean)
        self._costs[v.idx] = c
        return c

    def _choose(self, prompt_tokens: int, alive: Sequence[View]) -> Decision:
        missing = [v.idx for v in alive if not v.reported]
        if missing:
            v = min(alive, key=lambda v: (v.queued_tokens, v.idx))
            return Decision(v.idx, f"least queued tokens ({v.queued_tokens}); no load report "
                                   f"from replica(s) {missing}")
        tau = self.ctx.tbt_slo_s
        best = None
        for v in alive:
            c = self._predict(v)
            wait = (v.queued_tokens + prompt_tokens) / c.rate
            join = c.join_s + c.join_per_token_s * (prompt_tokens - c.mean_ctx)
            fits = not v.capacity_tokens or (
                v.context_tokens + v.queued_tokens + prompt_tokens <= v.capacity_tokens)
            key = (not (fits and join <= tau), wait, v.queued_tokens, v.idx)
            if best is None or _before(key, best[0]):
                best = (key, v, c, join, fits)
        assert best is not None
        (over, wait, queued, idx), v, c, join, fits = best
        mode = "aggregated" if c.aggregated else "spatial"
        if not over:
            why = f"first token in {wait * 1e3:.1f} ms ({mode}), decode {join * 1e3:.1f} ms"
        elif not fits:
            why = f"every replica short of KV or over tau; soonest first token {wait * 1e3:.1f} ms"
        else:
            why = f"every replica over tau; decode {join * 1e3:.1f} ms, first token " \
                  f"{wait * 1e3:.1f} ms"
        return Decision(idx, why, wait)

    def predicted_loads(self) -> list[float | None]:
        out: list[float | None] = []
        for v in self.views:
            out.append(v.queued_tokens / self._predict(v).rate if v.reported else None)
        return out


def _before(a: tuple, b: tuple) -> bool:
    """Key order with waits within _TIE treated as equal (then fewer queued tokens wins)."""
    if a[0] != b[0]:
        return a[0] < b[0]
    if abs(a[1] - b[1]) > _TIE:
        return a[1] < b[1]
    return a[2:] < b[2:]
