"""Plain request records the policy plans over.

Token accounting (the single rule every driver follows):

* ``prompt_len``: tokens of the prompt.
* ``computed``: prompt tokens whose KV is already in the cache -- prefix-cache hits plus chunks
  prefilled in earlier iterations. For a *waiting* request the remaining prompt is
  ``prompt_len - computed`` and its next chunk is ``PrefillChunk(rid, start=computed, length)``.
  Drivers should cap prefix hits at ``prompt_len - 1`` (as SGLang does), so that a waiting
  request always has at least one prompt token to compute; a waiting request with nothing left
  is skipped by batch formation.
* ``generated``: output tokens sampled so far. The chunk that completes the prompt samples the
  first one, so a *running decode* has ``computed == prompt_len`` and ``generated >= 1``.
* A decode step computes q = 1 token (the last sampled one, whose KV this step writes) over a
  cached context of ``c = prompt_len + generated - 1`` tokens, and samples one token.
* A prefill chunk computes q = ``length`` tokens over ``c = start`` cached tokens; it samples a
  token (one LM-head row) only when it completes the prompt (``start + length == prompt_len``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(slots=True, init=False)
class ReqState:
    """One request as the policy sees it (see the module docstring for the token rules).

    Read-only by convention, not frozen: drivers build one per request per iteration (256
    running decodes: 256 records every plan), and a frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field) costs about 4x this one's (the decision-cost benchmark's
    ``inputs`` case measures it). Compared by value, not hashable."""

    rid: str
    prompt_len: int
    computed: int
    generated: int
    max_new_tokens: int | None

    def __init__(self, rid: str, prompt_len: int, computed: int, generated: int,
                 max_new_tokens: int | None = None) -> None:
        if prompt_len < 1:
            raise ValueError(f"{rid}: prompt_len must be >= 1, got {prompt_len}")
        if not 0 <= computed <= prompt_len:
            raise ValueError(f"{rid}: computed={computed} outside [0, {prompt_len}]")
        if generated < 0:
            raise ValueError(f"{rid}: generated must be >= 0, got {generated}")
        self.rid = rid
        self.prompt_len = prompt_len
        self.computed = computed
        self.generated = generated
        self.max_new_tokens = max_new_tokens

    @property
    def remaining_prompt(self) -> int:
        """Prompt tokens still to prefill (waiting requests)."""
        return self.prompt_len - self.computed

    @property
    def decode_context(self) -> int:
        """Cached context c of this request's next decode step (running decodes)."""
        return self.prompt_len + self.generated - 1


class PrefillChunk(NamedTuple):
    """Prompt tokens ``[start, start + length)`` of request ``rid``, computed in one batch.

    A NamedTuple (immutable, compared by value): plans build several every iteration, and a
    tuple is built about 2x sooner than a frozen dataclass."""

    rid: str
    start: int
    length: int

    @property
    def end(self) -> int:
        return self.start + self.length

    def completes(self, prompt_len: int) -> bool:
        """Whether this chunk finishes the prompt (and therefore samples a token)."""
        return self.start + self.length >= prompt_len

    def to_dict(self) -> dict[str, object]:
        return {"rid": self.rid, "start": self.start, "length": self.length}
