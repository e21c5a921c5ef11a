"""The dataclass -> argparse helper shared by DuetArgs, the serving limits and SimConfig."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import pytest

from sglang_duet.cli_args import ArgError, add_dataclass_args, check_fields, from_namespace


@dataclass(frozen=True)
class Cfg:
    rate: float = field(default=1.5, metadata={"help": "a rate (1/s)", "min": 0.0})
    count: int = field(default=3, metadata={"help": "how many", "min": 1})
    limit: float | None = field(default=None, metadata={"help": "optional time (s)"})
    name: str = field(default="a", metadata={"help": "pick", "choices": lambda: ("a", "b")})
    on: bool = field(default=True, metadata={"help": "switch"})

    def __post_init__(self):
        check_fields(self)


def parse(argv):
    p = argparse.ArgumentParser()
    add_dataclass_args(p, Cfg)
    return from_namespace(Cfg, p.parse_args(argv))


def test_defaults_and_values():
    assert parse([]) == Cfg()
    assert parse(["--rate", "2", "--count", "4", "--limit", "0.5", "--name", "b",
                  "--no-on"]) == Cfg(2.0, 4, 0.5, "b", False)


@pytest.mark.parametrize("argv, needle", [
    (["--rate", "nan"], "--rate: invalid value nan; must be a finite number"),
    (["--limit", "inf"], "--limit: invalid value inf; must be a finite number"),
    (["--rate", "0"], "--rate: invalid value 0.0; must be > 0.0"),
    (["--count", "0"], "--count: invalid value 0; must be >= 1"),
    (["--count", "x"], "--count: invalid value 'x'; expected int"),
    (["--name", "c"], "--name: invalid value 'c'; accepted values: a, b"),
])
def test_bad_values_name_the_flag(argv, needle):
    with pytest.raises(ArgError) as e:
        parse(argv)
    assert needle in str(e.value)


def test_help_has_defaults_and_callable_choices():
    p = argparse.ArgumentParser()
    add_dataclass_args(p, Cfg)
    text = " ".join(p.format_help().split())
    assert "[default: 1.5]" in text and "[default: None]" in text and "{a,b}" in text
    assert "switch [default: True]" in text
