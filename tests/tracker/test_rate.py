"""The rate counter of docs/trust.md#limits (tracker/trust/limits.py), the same in both modes: counted
in one script on Redis, through the cache's calls elsewhere."""

from __future__ import annotations

import uuid

import pytest

from tracker.trust import limits
from tracker.trust.limits import rate_hit

START = 60 * 16_667  # the start of a 60-second window


@pytest.fixture
def clock(monkeypatch):
    def at(seconds: float) -> None:
        monkeypatch.setattr(limits.time, "time", lambda: START + seconds)

    return at


def hits(key: str, count: int) -> list[bool]:
    return [rate_hit(scope="test", key=key, limit=3, window_seconds=60) for _ in range(count)]


def test_events_are_counted_to_the_limit_and_then_refused_uncounted(clock):
    key, other = uuid.uuid4().hex, uuid.uuid4().hex
    clock(10)
    assert hits(key, 5) == [True, True, True, False, False]
    assert hits(other, 1) == [True]  # each key counts apart
    clock(59)
    assert hits(key, 1) == [False]


def test_the_previous_window_weighs_by_what_of_it_the_sliding_window_still_holds(clock):
    key = uuid.uuid4().hex
    clock(0)
    assert hits(key, 3) == [True, True, True]
    clock(90)  # half of the previous window still inside: it counts 1.5
    assert hits(key, 3) == [True, True, False]  # 1.5 + 1 < 3, 1.5 + 2 is not
    clock(125)  # two windows on, the first no longer counts; the second's 2 weigh 1.83
    assert hits(key, 3) == [True, True, False]  # 1.83 + 1 < 3, 1.83 + 2 is not
