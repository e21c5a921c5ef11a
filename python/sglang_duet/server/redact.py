"""No response carries a secret: the server arguments that hold one, and their values, redacted.

SGLang reports its whole `ServerArgs` on `/server_info` and `/get_server_info` (top level, and
again per data-parallel rank under `internal_states`), `api_key` and `admin_api_key` among them:
a client with the normal key would read the admin key there. Which arguments are secret is
derived from the names of `ServerArgs`' dataclass fields (`SECRET_FIELD`), so a key field that a
later SGLang adds is redacted too; `test_redact.py` lists every field whose name looks sensitive
and requires it to be either matched here or allowed there with a reason.

The middleware applies a `Redactor` to every response body: in a JSON body, a secret field's
non-empty value becomes `REDACTED` wherever the field appears (any depth); in any body, every
occurrence of a secret's value (its raw text and its JSON-escaped forms) becomes `REDACTED`,
also when a stream splits it across pieces.
Values shorter than `MIN_VALUE_CHARS` are only redacted by field name: replacing a 3-character
string in every answer would corrupt generated text.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Iterable
from typing import Any

# A field whose value may be a secret: passwords, secrets and credentials anywhere in the name;
# a key as the last word (`api_key`, `admin_api_key`); an authentication token (a future
# `hf_token`; `*_per_token` counts are not); and the free-form JSON "extra config" strings,
# which carry storage back-ends' credentials.
SECRET_FIELD = re.compile(
    r"secret|credential|passw|passphrase|(?:^|_)(?:key|extra_config)$"
    r"|(?:^|_)(?:auth|access|api|hf|bearer|session|refresh|)_?token$(?<!_per_token)"
    r"(?<!_first_token)")
REDACTED = "<redacted>"
MIN_VALUE_CHARS = 6


def secret_fields(server_args_cls: type) -> tuple[str, ...]:
    """The names of `server_args_cls`' dataclass fields that may hold a secret."""
    return tuple(f.name for f in dataclasses.fields(server_args_cls)
                 if SECRET_FIELD.search(f.name))


def _blank(value: Any) -> bool:
    """No secret in it: unset, or an empty string, list or JSON object (`"{}"`, a default)."""
    if isinstance(value, str):
        return value.strip() in ("", "{}", "[]", "null")
    return value is None or value in ([], {}, ())


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


@dataclasses.dataclass(frozen=True)
class Redactor:
    """`fields`: secret field names; `values`: the secrets' values on this server."""

    fields: frozenset[str] = frozenset()
    values: tuple[str, ...] = ()

    @classmethod
    def for_server(cls, server_args: Any) -> Redactor:
        names = secret_fields(type(server_args))
        values = {s for n in names for s in _strings(getattr(server_args, n, None))
                  if not _blank(s)}
        return cls(frozenset(names), tuple(sorted(values, key=len, reverse=True)))

    @property
    def active(self) -> bool:
        return bool(self.values)

    @functools.cached_property
    def _needles(self) -> list[bytes]:
        out: list[bytes] = []
        for v in self.values:
            if len(v) < MIN_VALUE_CHARS:
                continue
            for form in (v, json.dumps(v)[1:-1], json.dumps(v, ensure_ascii=False)[1:-1]):
                b = form.encode()
                if b not in out:
                    out.append(b)
        return out

    def chunk(self, data: bytes) -> bytes:
        """`data` with every secret value replaced (for pieces of a stream)."""
        for needle in self._needles:
            if needle in data:
                data = data.replace(needle, REDACTED.encode())
        return data

    def stream(self, carry: bytes, data: bytes, last: bool) -> tuple[bytes, bytes]:
        """One piece of a streamed answer: (what to send now, what to carry to the next piece).
        A secret split across two pieces is redacted too: the end of a piece that begins a
        secret is held back until the next piece shows whether it is one (an SSE event ends
        in a newline, which begins no secret, so events are not delayed)."""
        data = self.chunk(carry + data)
        if last:
            return data, b""
        keep = 0
        for needle in self._needles:
            for k in range(min(len(needle) - 1, len(data)), keep, -1):
                if data.endswith(needle[:k]):
                    keep = k
                    break
        return data[:len(data) - keep], data[len(data) - keep:]

    def body(self, data: bytes, json_body: bool) -> bytes:
        """A whole response body with secret fields (JSON) and secret values redacted."""
        if not self.active:
            return data
        if json_body and any(f'"{name}"'.encode() in data for name in self.fields):
            try:
                obj = json.loads(data)
            except (ValueError, RecursionError):
                pass
            else:
                data = json.dumps(self._walk(obj), ensure_ascii=False,
                                  separators=(",", ":")).encode()
        return self.chunk(data)

    def _walk(self, x: Any) -> Any:
        if isinstance(x, dict):
            return {k: (REDACTED if k in self.fields and not _blank(v) else self._walk(v))
                    for k, v in x.items()}
        if isinstance(x, list):
            return [self._walk(v) for v in x]
        return x
