"""cross_context_events: the start-up question whether a partition's streams take events of the
primary context (CPU fakes for torch's streams and events)."""

from __future__ import annotations

import pytest
import torch

from sglang_duet.partition.events import cross_context_events


class Stream:
    def __init__(self, name, log, refuse=False):
        self.name, self.log, self.refuse = name, log, refuse

    def wait_event(self, event):
        self.log.append((self.name, "waits", event.on))

    def synchronize(self):
        self.log.append((self.name, "sync"))


class Menu:
    def __init__(self, sizes, streams):
        self.decode_sizes, self._streams, self.asked = sizes, streams, []

    def streams(self, size):
        self.asked.append(size)
        return self._streams


@pytest.fixture
def fake_cuda(monkeypatch):
    log: list = []
    current = Stream("current", log)

    class Event:
        def record(self, stream):
            if stream.refuse:
                raise RuntimeError("CUDA error: invalid resource handle")
            self.on = stream.name
            log.append((stream.name, "records"))

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: current)
    return log


def test_events_both_ways_on_both_streams_of_one_split(fake_cuda):
    menu = Menu((16, 64), (Stream("decode", fake_cuda), Stream("prefill", fake_cuda)))
    assert cross_context_events(menu) == ""
    assert menu.asked == [16]  # one split answers for the backend
    one_way_and_back = [
        [(side, "records"), ("current", "waits", side), ("current", "records"),
         (side, "waits", "current"), (side, "sync")] for side in ("decode", "prefill")]
    assert fake_cuda == one_way_and_back[0] + one_way_and_back[1] + [("current", "sync")]


def test_a_refused_record_is_the_answer(fake_cuda):
    menu = Menu((16,), (Stream("decode", fake_cuda, refuse=True), Stream("prefill", fake_cuda)))
    assert "invalid resource handle" in cross_context_events(menu)


def test_no_split_asks_nothing(fake_cuda):
    menu = Menu((), ())
    assert cross_context_events(menu) == "" and menu.asked == [] and fake_cuda == []
