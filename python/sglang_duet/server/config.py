"""ServeArgs: the HTTP-side limits, flags `--duet-max-body-mb`, `--duet-drain-timeout-s`, ..."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field

from sglang_duet.args import PREFIX, DuetArgError
from sglang_duet.cli_args import ArgError, add_dataclass_args, check_fields, from_namespace


@dataclass(frozen=True)
class ServeArgs:
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

    def __post_init__(self) -> None:
        try:
            check_fields(self, PREFIX)
        except ArgError as e:
            raise DuetArgError(str(e)) from None

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 1024 * 1024)

    @classmethod
    def add_cli_args(cls, parser: argparse.ArgumentParser) -> None:
        add_dataclass_args(parser.add_argument_group("sglang-duet serving"), cls, prefix=PREFIX,
                           dest_prefix="duet_")

    @classmethod
    def from_cli_args(cls, ns: argparse.Namespace) -> ServeArgs:
        try:
            return from_namespace(cls, ns, prefix=PREFIX, dest_prefix="duet_")
        except ArgError as e:
            raise DuetArgError(str(e)) from None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
