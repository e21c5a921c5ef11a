"""A simulated request: its lengths, progress, KV pages and the record of when tokens came out.

Token times are not stored one by one. A request's output is a sequence of *runs*: a token
sampled by a prefill (the first token, or the token a recomputation after preemption samples)
at time ``t0``, followed by the decode steps ``[s0, s1)`` of one replica's step-time log. The
metrics expand the runs into token times once, at the end, with numpy.

Preemption follows SGLang's retract-and-recompute: the request's KV is freed and it re-enters
the queue with ``base = prompt + generated`` tokens to prefill again (``gen0 = generated``).
Towards the policy it then looks like a request whose prompt is ``base`` (see ``to_state``),
which matches ``sglang_duet.policy.state``'s token rule.
"""

from __future__ import annotations

from sglang_duet.policy.state import ReqState

__all__ = ["Request"]


class Request:
    __slots__ = (
        "idx", "rid", "arrival_s", "prompt_len", "output_len",
        "base", "gen0", "computed", "gen", "pages", "replica",
        "first_token_s", "finish_s", "runs", "run_t0", "run_s0", "run_rep",
        "preemptions", "admit_seq", "rejected", "sched_s", "hashes", "entry", "server",
        "queued_tokens",
    )

    def __init__(self, idx: int, arrival_s: float, prompt_len: int, output_len: int) -> None:
        self.idx = idx
        self.rid = str(idx)
        self.arrival_s = arrival_s
        self.prompt_len = prompt_len
        self.output_len = output_len
        self.base = prompt_len  # tokens the (next) prefill must cover
        self.gen0 = 0  # tokens generated before the current prefill (recompute)
        self.computed = 0  # of base
        self.gen = 0  # tokens generated since the current prefill (>= 1 once decoding)
        self.pages = 0
        self.replica = -1
        self.first_token_s = -1.0
        self.finish_s = -1.0
        # finished runs: (replica, t0, s0, s1); the open run is run_rep/run_t0/run_s0
        self.runs: list[tuple[int, float, int, int]] = []
        self.run_t0 = -1.0
        self.run_s0 = -1
        self.run_rep = -1
        self.preemptions = 0
        self.admit_seq = 0
        self.rejected = False
        self.sched_s = -1.0  # when its first prefill chunk first ran (scheduling delay's end)
        self.hashes: list[int] | None = None  # the trace's prompt block hashes (prefix cache)
        self.entry = -1  # the replica whose front end took the request in (sim/frontend.py)
        self.server = -1  # the front-end server (process) it entered through and streams from
        # its replica's prefill-token count when it last entered the queue (hrrn's aging)
        self.queued_tokens = 0

    # --- token accounting -----------------------------------------------------------------------
    @property
    def generated(self) -> int:
        return self.gen0 + self.gen

    @property
    def remaining_out(self) -> int:
        return self.output_len - self.gen0 - self.gen

    @property
    def kv_tokens(self) -> int:
        """Tokens whose KV is cached: the prefilled part, plus one per decode step run."""
        if self.gen == 0:
            return self.computed
        return self.base + self.gen - 1

    def to_state(self) -> ReqState:
        return ReqState(self.rid, self.base, self.computed, self.gen, self.output_len - self.gen0)

    # --- runs -----------------------------------------------------------------------------------
    def open_run(self, replica: int, t0: float, s0: int) -> None:
        self.run_rep, self.run_t0, self.run_s0 = replica, t0, s0

    def close_run(self, s1: int) -> None:
        self.runs.append((self.run_rep, self.run_t0, self.run_s0, s1))
        self.run_rep, self.run_t0, self.run_s0 = -1, -1.0, -1

    def reset_for_recompute(self) -> None:
        """Preempted: KV gone, the next prefill covers prompt + everything generated."""
        self.gen0 += self.gen
        self.base = self.prompt_len + self.gen0
        self.gen = 0
        self.computed = 0
        self.preemptions += 1

    def __repr__(self) -> str:
        return (f"Request({self.rid}, p={self.prompt_len}, o={self.output_len}, "
                f"base={self.base}, computed={self.computed}, gen={self.gen0}+{self.gen})")
