"""--duet-router: its choices are the router registry plus SGLang's own controller; a bad name
exits 2 naming the flag."""

from __future__ import annotations

import pytest

from sglang_duet.args import ROUTER_CHOICES, DuetArgError, DuetArgs
from sglang_duet.router import ROUTERS


def test_choices_are_the_registry_plus_sglang():
    assert ROUTER_CHOICES == (*ROUTERS, "sglang")
    assert DuetArgs().router == "duet"


def test_unknown_router_names_the_flag():
    with pytest.raises(DuetArgError, match="--duet-router: invalid value 'random'"):
        DuetArgs(router="random")


def test_launcher_exits_2_on_unknown_router(capsys):
    pytest.importorskip("sglang")
    from sglang_duet.launch_server import resolve

    with pytest.raises(SystemExit) as e:
        resolve(["--duet-router", "random"])
    assert e.value.code == 2
    assert "--duet-router" in capsys.readouterr().err
