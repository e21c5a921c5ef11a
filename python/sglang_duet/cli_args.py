"""One bridge from a frozen dataclass to argparse and back, for every config that is a CLI.

`DuetArgs`, the serving limits and the simulator's `SimConfig` each declare their flags once, as
dataclass fields with `metadata={"help": ...}`; this module turns the fields into flags (with the
default in the help), converts the strings back, and checks the values with one set of rules, so
that a bad value gets the same one-line message (naming the flag) wherever it is given.

Field metadata understood: `help` (required), `choices` (a tuple, or a zero-argument callable
returning one, so registries are read when the parser is built), `min` (floats must be greater,
ints at least this), `flag` (overrides the generated flag name).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["ArgError", "add_dataclass_args", "check_fields", "field_choices", "from_namespace"]


class ArgError(ValueError):
    """A flag got a value it does not accept; the message names the flag."""


def _kind(f: dataclasses.Field) -> str:
    """'int' | 'float' | 'str' | 'bool' from the annotation (annotations are strings here)."""
    text = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    return text.split("|")[0].strip()


def _optional(f: dataclasses.Field) -> bool:
    text = f.type if isinstance(f.type, str) else str(f.type)
    return "None" in text


def field_choices(f: dataclasses.Field, extra: Mapping[str, Sequence[str]] | None = None
                  ) -> tuple[str, ...] | None:
    """The accepted values of a field: `extra[name]`, else its metadata's `choices`."""
    if extra and f.name in extra:
        return tuple(extra[f.name])
    choices = f.metadata.get("choices")
    if callable(choices):
        choices = choices()
    return tuple(choices) if choices is not None else None


def flag_name(f: dataclasses.Field, prefix: str = "--") -> str:
    return f.metadata.get("flag") or prefix + f.name.replace("_", "-")


def add_dataclass_args(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type, *,
                       prefix: str = "--", dest_prefix: str = "",
                       choices: Mapping[str, Sequence[str]] | None = None) -> None:
    """One flag per field of `cls`: `prefix + name` with dashes, dest `dest_prefix + name`.

    Values are parsed as strings and converted by `from_namespace`, so that a bad value reaches
    one message that lists the accepted values instead of argparse's generic one.
    """
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else None
        kw: dict[str, Any] = {"dest": dest_prefix + f.name, "default": default}
        accepted = field_choices(f, choices)
        help_ = f.metadata.get("help", "")
        if _kind(f) == "bool":
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw["type"] = str
            kw["metavar"] = "{" + ",".join(accepted) + "}" if accepted else f.name.upper()
        kw["help"] = f"{help_} [default: {default}]"
        parser.add_argument(flag_name(f, prefix), **kw)


def convert(f: dataclasses.Field, raw: Any, flag: str) -> Any:
    """A CLI string to the field's type; ArgError naming the flag when it does not parse."""
    if raw is None or not isinstance(raw, str):
        return raw
    kind = _kind(f)
    if kind not in ("int", "float"):
        return raw
    if _optional(f) and raw.lower() in ("none", ""):
        return None
    try:
        return int(raw) if kind == "int" else float(raw)
    except ValueError:
        raise ArgError(f"{flag}: invalid value {raw!r}; expected {kind}") from None


def check_value(f: dataclasses.Field, value: Any, flag: str,
                choices: Sequence[str] | None = None) -> None:
    """Raise ArgError unless `value` is acceptable for field `f` (None passes optional fields)."""
    if value is None:
        return
    if choices is not None and value not in choices:
        raise ArgError(f"{flag}: invalid value {value!r}; accepted values: {', '.join(choices)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ArgError(f"{flag}: invalid value {value!r}; must be a finite number")
    if "min" in f.metadata and not isinstance(value, bool):
        lo = f.metadata["min"]
        if isinstance(value, float) and value <= lo:
            raise ArgError(f"{flag}: invalid value {value!r}; must be > {lo}")
        if isinstance(value, int) and value < lo:
            raise ArgError(f"{flag}: invalid value {value!r}; must be >= {lo}")


def check_fields(obj: Any, prefix: str = "--",
                 choices: Mapping[str, Sequence[str]] | None = None) -> None:
    """Check every field of a dataclass instance (call from `__post_init__`)."""
    for f in dataclasses.fields(obj):
        check_value(f, getattr(obj, f.name), flag_name(f, prefix), field_choices(f, choices))


def from_namespace(cls: type, ns: argparse.Namespace, *, prefix: str = "--",
                   dest_prefix: str = "", build: Callable[..., Any] | None = None) -> Any:
    """Build `cls` from a parsed namespace (strings converted, values checked by `cls`)."""
    values = {}
    for f in dataclasses.fields(cls):
        values[f.name] = convert(f, getattr(ns, dest_prefix + f.name), flag_name(f, prefix))
    return (build or cls)(**values)
