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


@dataclass(frozen=True, slots=True)
class ReqState:
    """One request as the policy sees it (see the module docstring for the token rules)."""

    rid: str
    prompt_len: int
    computed: int
    generated: int
    max_new_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.prompt_len < 1:
            raise ValueError(f"{self.rid}: prompt_len must be >= 1, got {self.prompt_len}")
        if not 0 <= self.computed <= self.prompt_len:
            raise ValueError(f"{self.rid}: computed={self.computed} outside [0, {self.prompt_len}]")
        if self.generated < 0:
            raise ValueError(f"{self.rid}: generated must be >= 0, got {self.generated}")

    @property
    def remaining_prompt(self) -> int:
        """Prompt tokens still to prefill (waiting requests)."""
        return self.prompt_len - self.computed

    @property
    def decode_context(self) -> int:
        """Cached context c of this request's next decode step (running decodes)."""
        return self.prompt_len + self.generated - 1


@dataclass(frozen=True, slots=True)
class PrefillChunk:
    """Prompt tokens ``[start, start + length)`` of request ``rid``, computed in one batch."""

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
