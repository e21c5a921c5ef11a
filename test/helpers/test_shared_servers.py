"""The shared-server plan (helpers/shared_servers.py) with fake servers: who starts when, and
that at most one server no test has used yet is up at a time."""

from __future__ import annotations

from dataclasses import dataclass, field

from helpers.shared_servers import SharedServers


@dataclass
class FakeServer:
    name: str
    log: list[str]
    stopped: bool = False

    def start(self, timeout: float) -> FakeServer:
        self.log.append(f"start {self.name}")
        return self

    def stop(self) -> None:
        self.stopped = True
        self.log.append(f"stop {self.name}")


@dataclass
class Item:
    nodeid: str
    fixturenames: list[str] = field(default_factory=list)


def plan(uses: list[list[str]]) -> tuple[SharedServers, list[Item], list[str]]:
    log: list[str] = []
    names = sorted({n for u in uses for n in u})
    shared = SharedServers({n: (lambda n=n: FakeServer(n, log)) for n in names})
    items = [Item(f"t{i}", ["tmp_path", *u]) for i, u in enumerate(uses)]
    shared.plan_uses(items)
    return shared, items, log


def run(shared: SharedServers, items: list[Item]) -> list[tuple[str, str | None]]:
    """What a pytest run does per test; returns (test, the name prestarted before it)."""
    started = []
    for item in items:
        shared.current = item.fixturenames
        started.append((item.nodeid, shared.prestart(item.nodeid)))
        for name in shared.configs.keys() & set(item.fixturenames):
            shared.get(name)
        for fut in list(shared._starting.values()):
            fut.result()  # a test's body runs after its servers are up
        shared.done_with(item.nodeid)
    shared.stop_all()
    return started


def test_each_configuration_starts_before_its_first_user_one_ahead():
    shared, items, log = plan([[], ["a"], [], ["b"], ["a", "c"], []])
    assert shared.first_use == {"a": 1, "b": 3, "c": 4}
    prestarted = run(shared, items)
    # a starts before t0; b only once a is in use (t1); c once b is in use (t3)
    assert prestarted == [("t0", "a"), ("t1", "b"), ("t2", None), ("t3", "c"), ("t4", None),
                          ("t5", None)]
    assert log.count("start a") == log.count("start b") == log.count("start c") == 1
    assert log.index("stop b") < log.index("stop a")  # b's last user is t3, a's is t4


def test_nothing_is_prestarted_for_an_unknown_test_or_past_the_last_first_use():
    shared, items, _ = plan([["a"], []])
    assert shared.prestart("not-collected") is None
    assert shared.prestart("t1") is None
    assert shared.prestart("t0") is None  # t0 itself starts a when it is set up
    shared.stop_all()


def test_a_failed_prestart_fails_its_first_user_only():
    log: list[str] = []

    def broken() -> FakeServer:
        raise RuntimeError("server exited with 1")

    shared = SharedServers({"bad": broken, "ok": lambda: FakeServer("ok", log)})
    shared.plan_uses([Item("t0"), Item("t1", ["bad"]), Item("t2", ["ok"])])
    assert shared.prestart("t0") == "bad"
    try:
        shared.get("bad")
    except RuntimeError as e:
        assert "exited" in str(e)
    else:
        raise AssertionError("the failed start was not reported")
    shared.done_with("t1")  # a failed start is dropped without a stop
    assert shared.prestart("t1") == "ok" and shared.get("ok").name == "ok"
    shared.stop_all()
    assert log == ["start ok", "stop ok"]
