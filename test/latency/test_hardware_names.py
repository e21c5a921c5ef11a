"""#16 item 9: one set of hardware names; every name a CLI suggests or accepts resolves."""

from __future__ import annotations

import re

import pytest

from sglang_duet.args import HARDWARE_CHOICES
from sglang_duet.latency import HARDWARE, get_hardware
from sglang_duet.latency.hardware import HARDWARE_ALIASES
from sglang_duet.partition import GPU_SHAPES
from sglang_duet.partition.__main__ import main as partition_main


@pytest.mark.parametrize("name", sorted(GPU_SHAPES))
def test_partition_hardware_names_are_latency_profiles(name):
    profile = get_hardware(name)
    assert profile.name == GPU_SHAPES[name].name
    assert name in HARDWARE_CHOICES


def test_aliases_point_at_profiles():
    for alias, target in HARDWARE_ALIASES.items():
        assert target in HARDWARE and get_hardware(alias) is HARDWARE[target]


def test_partition_cli_suggests_names_that_serve(capsys):
    partition_main([])
    out = capsys.readouterr().out
    for suggestion in re.findall(r"--hardware ([\w|-]+)", out):
        for name in suggestion.split("|"):
            get_hardware(name)
            assert name in HARDWARE_CHOICES
