"""ServeArgs: the HTTP-side limits, flags `--duet-max-body-mb`, `--duet-drain-timeout-s`, ..."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sglang_duet.args import DuetFlags


@dataclass(frozen=True)
class ServeArgs(DuetFlags):
    GROUP: ClassVar[str] = "sglang-duet serving"

    max_body_mb: float = field(
        default=16.0,
        metadata={"help": "Largest request body in MiB; larger ones get 413 before they are "
                          "read (> 0).", "min": 0.0},
    )
    drain_timeout_s: float = field(
        default=30.0,
        metadata={"help": "After SIGTERM, seconds in-flight requests get to finish before they "
                          "end with an error event (> 0).", "min": 0.0},
    )
    strict_fields: bool = field(
        default=True,
        metadata={"help": "400 for request fields that neither SGLang nor the OpenAI API "
                          "defines; --no-duet-strict-fields lets them through."},
    )

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 1024 * 1024)

