"""The duet router: round-robin, unless the latency model predicts that the replica in turn
would give a request its first token clearly later than another, or push its decodes past tau.

Per replica, from its last report (n decoding requests holding K KV tokens, w queued requests
with Q prompt tokens not yet computed), the latency model predicts:

* t_mix: one mixed iteration, a full prompt chunk (token budget B) plus the n decodes. Prefill
  progresses at rate = B / t_mix tokens per second under that decode load, so a new request of p
  prompt tokens gets its first token after about wait = (A + p) / rate seconds, A the queued
  tokens the replica's admission order (`RouterContext.admission`, the runtime's and the
  simulator's `policy.admission.Admission`) would prefill before it ((Q + B) / rate is the
  replica's load figure for /metrics and the gateway).

  A comes from what a report holds: w queued requests and Q tokens, no prompt lengths and no
  arrival times. The router asks the same `Admission.order` about w requests of Q / w tokens
  each and the new one, every one arrived now (so no request is past the aging bound, and the
  queued ones come first on ties); A is Q / w tokens for each queued request placed before the
  new one. In arrival order (fcfs, or no admission given) A = Q. Tokens of a chunked prefill in
  progress are part of Q, spread over the w requests (SGLang continues that one first).
* t_future: one decode step once the queued requests and this one decode there too:
  t_decode + (w + 1) * per_request + (Q + p) * per_context_token, with both slopes predicted by
  the model at the replica's mean context. Above tau not even the whole device keeps that decode
  batch within the SLO (DuetServe's spatial mode can give decodes at most all SMs), so the
  replica is a last resort. Whether the replica runs aggregated or spatial now is t_mix <= tau.

The best replica: those with KV room for the request first; among them, those with t_future <=
tau by the smallest wait; when there is none, the smallest t_future (the least overloaded decode
batch); equal predictions by least queued tokens. The choice is the next replica in turn
(round-robin) when it has KV room and a decode batch within tau, as the best has, and a wait at
most ``RR_SLACK_S`` longer; else the best. Replicas that have not reported yet fall back to
least queued tokens.

Why round-robin first: it spreads arrivals evenly, so each replica's front end and decode batch
grow alike. Sending every request to the soonest first token bunches arrivals on one replica at
a time, and that replica's front end then delays the tokens it streams while it takes them in
(`sim/frontend.py`). In the simulator (azure-conv, 4 x H100, Qwen3-8B, 72 req/s) that made 20%
of requests miss their P99 TBT at the client with every engine gap within 90 ms, and the
soonest-first-token rule reached 66.7 req/s against round-robin's 75.7. Where prompt lengths
differ a lot (mooncake) the model still steers a request away from a replica with seconds of
prompt work queued, which round-robin cannot see (`benchmark/results/router/` has the figures).
The predictions depend on n and K only, so they are made once per report that changes them (at
most every `refresh_s`, and only for decode shapes not predicted before); a dispatch is
arithmetic over the replicas.
"""

from __future__ import annotations

from collections.abc import Sequence

from .base import Router, View
from .load import Decision

__all__ = ["DuetRouter"]

_PROBE_TOKENS = 1024  # context added to measure a decode step's cost per context token
RR_SLACK_S = 0.5  # how much later a first token the replica in turn may give (seconds)
_TIE = 1e-9  # predictions closer than this (seconds) are equal
# Predictions are kept per (decodes, mean context rounded down to 2**_CTX_SHIFT tokens): replica
# states repeat, and the model is evaluated only for shapes not seen before.
_CTX_SHIFT = 8
_SHAPES_MAX = 4096
_LATER_S = 1e-6  # the stand-in newcomer's arrival after the queued requests (seconds)


class _Costs:
    """Predictions for one replica's decode state (seconds; rate in prompt tokens/s)."""

    __slots__ = ("version", "rate", "mix_s", "decode_s", "per_req_s", "per_token_s")

    def __init__(self, version: int, rate: float, mix_s: float, decode_s: float,
                 per_req_s: float, per_token_s: float) -> None:
        self.version, self.rate, self.mix_s, self.decode_s = version, rate, mix_s, decode_s
        self.per_req_s, self.per_token_s = per_req_s, per_token_s


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
        self._turn = -1  # the replica chosen last: the next one is in turn
        self._shapes: dict[tuple[int, int], tuple[float, float, float, float, float]] = {}
        adm = self.ctx.admission
        self._admission = adm if adm is not None and adm.cfg.order != "fcfs" else None
        self._ahead: dict[tuple[int, int, int], int] = {}  # (w, Q / w, p) -> requests before

    def _predict(self, v: View) -> _Costs:
        c = self._costs[v.idx]
        if c is not None and c.version == v.version:
            return c
        n = v.running
        mean = (v.context_tokens // n if n else 0) >> _CTX_SHIFT << _CTX_SHIFT
        key = (n, mean)
        shape = self._shapes.get(key)
        if shape is None:
            if len(self._shapes) >= _SHAPES_MAX:
                self._shapes.clear()
            shape = self._shapes[key] = self._shape(n, mean)
        c = _Costs(v.version, *shape)
        self._costs[v.idx] = c
        return c

    def _shape(self, n: int, mean: int) -> tuple[float, float, float, float, float]:
        """(rate, t_mix, t_decode, per_request, per_context_token) for n decodes of `mean`
        context tokens."""
        lm, batch = self.ctx.latency, self._batch
        decode = batch.decode(n, mean)
        mix = lm.predict_union(decode, self._chunk).total_s  # type: ignore[union-attr]
        dec = lm.predict(decode).total_s if n else 0.0  # type: ignore[union-attr]
        plus = lm.predict(batch.decode(n + 1, mean)).total_s  # type: ignore[union-attr]
        probe = lm.predict(batch.decode(n + 1, mean + _PROBE_TOKENS)).total_s  # type: ignore
        per_token = max(probe - plus, 0.0) / (_PROBE_TOKENS * (n + 1))
        per_req = max(plus - dec - per_token * mean, 0.0)
        return self.ctx.token_budget / mix, mix, dec, per_req, per_token

    def _ahead_tokens(self, v: View, prompt_tokens: int) -> int:
        """Queued tokens the admission order would prefill before a new request of
        ``prompt_tokens`` on replica ``v`` (the module docstring's A)."""
        w, queued = v.waiting, v.queued_tokens
        if self._admission is None or w == 0:
            return queued
        mean = queued // w
        key = (w, mean, prompt_tokens)
        before = self._ahead.get(key)
        if before is None:
            if len(self._ahead) >= _SHAPES_MAX:
                self._ahead.clear()
            cands = [(0.0, mean, 0)] * w
            cands.append((_LATER_S, prompt_tokens, 0))  # the newcomer arrives after them
            before = self._ahead[key] = self._admission.order(cands, 0.0).index(w)
        return queued if before == w else queued * before // w

    def _choose(self, prompt_tokens: int, alive: Sequence[View]) -> Decision:
        missing = [v.idx for v in alive if not v.reported]
        if missing:
            v = min(alive, key=lambda v: (v.queued_tokens, v.running + v.waiting, v.idx))
            return Decision(v.idx, f"least queued tokens ({v.queued_tokens}); no load report "
                                   f"from replica(s) {missing}")
        tau = self.ctx.tbt_slo_s
        best = None
        by_idx = {}
        for v in alive:
            c = self._predict(v)
            queued = v.queued_tokens + prompt_tokens
            wait = (self._ahead_tokens(v, prompt_tokens) + prompt_tokens) / c.rate
            future = c.decode_s + (v.waiting + 1) * c.per_req_s + queued * c.per_token_s
            fits = not v.capacity_tokens or (
                v.context_tokens + queued <= v.capacity_tokens)
            over = future > tau
            key = (not fits, over, future if over else 0.0, wait, v.queued_tokens, v.idx)
            by_idx[v.idx] = (key, c, future, fits)
            if best is None or _before(key, best[0]):
                best = (key, c, future, fits)
        assert best is not None
        n = len(self.views)
        turn = next(by_idx[i] for i in ((self._turn + j) % n for j in range(1, n + 1))
                    if i in by_idx)
        in_turn = (best[0][:2] == (False, False) == turn[0][:2]
                   and turn[0][3] <= best[0][3] + RR_SLACK_S)
        if in_turn:
            best = turn
        (short, over, _, wait, _, idx), c, future, fits = best
        self._turn = idx
        mode = "aggregated" if c.mix_s <= tau else "spatial"
        if short:
            why = f"no replica with KV room; first token in {wait * 1e3:.1f} ms"
        elif not over:
            why = f"first token in {wait * 1e3:.1f} ms, decode batch {future * 1e3:.1f} ms " \
                  f"<= tau ({mode} now, {'in turn' if in_turn else 'out of turn'})"
        else:
            why = f"every replica over tau; least loaded decode batch {future * 1e3:.1f} ms " \
                  f"({mode} now), first token in {wait * 1e3:.1f} ms"
        return Decision(idx, why, wait)

    def predicted_loads(self) -> list[float | None]:
        """Per replica, predicted seconds until a new request of one full chunk (the token
        budget) would get its first token: queued prefill work plus that chunk, at the rate the
        replica's decode load leaves (None before a report). Grows with both the queue and the
        decode batch, so an idle replica and a busy one differ even with empty queues."""
        budget = self.ctx.token_budget
        return [(v.queued_tokens + budget) / self._predict(v).rate if v.reported else None
                for v in self.views]


def _before(a: tuple, b: tuple) -> bool:
    """Key order with predictions within _TIE treated as equal."""
    if a[:2] != b[:2]:
        return a[:2] < b[:2]
    for i in (2, 3):
        if abs(a[i] - b[i]) > _TIE:
            return a[i] < b[i]
    return a[4:] < b[4:]
