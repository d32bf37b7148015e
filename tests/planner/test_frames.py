"""Frames joined for a watcher that fell behind, and the watcher's inbox."""

from __future__ import annotations

import asyncio
import copy

from planner import frames
from planner.watching import Inbox


def delta(text: str, n: int) -> dict:
    return {**frames.text_delta(text), "n": n, "origin": "p"}


def test_runs_of_text_deltas_are_joined_and_everything_else_kept_in_order():
    tool = {**frames.tool_call(id="t1", name="get_item", input={"key": "BAL-1"}), "n": 3, "origin": "p"}
    batch = [delta("a", 1), delta("b", 2), tool, delta("c", 4), delta("d", 5), delta("e", 6)]
    before = copy.deepcopy(batch)
    out = frames.coalesced(batch)
    assert [(f["type"], f.get("text"), f["n"]) for f in out] == [
        ("text_delta", "ab", 2),
        ("tool_call", None, 3),
        ("text_delta", "cde", 6),
    ]
    assert batch == before  # shared with other watchers and the turn's catch-up: never changed


def test_a_text_reset_splits_runs():
    out = frames.coalesced([delta("partial", 1), {**frames.text_reset(), "n": 2}, delta("again", 3)])
    assert [f["type"] for f in out] == ["text_delta", "text_reset", "text_delta"]
    assert [f.get("text") for f in out] == ["partial", None, "again"]


def test_nothing_to_join():
    assert frames.coalesced([]) == []
    single = [delta("x", 1)]
    assert frames.coalesced(single) == single


async def test_the_inbox_hands_over_everything_waiting_and_a_replay_goes_first():
    inbox = Inbox([delta("a", 1)])
    assert await inbox.take() == [delta("a", 1)]
    waiting = asyncio.ensure_future(inbox.take())
    await asyncio.sleep(0)
    assert not waiting.done()  # nothing there: it waits
    inbox.put([delta("c", 3)])
    inbox.put_first([delta("b", 2)])
    inbox.put([delta("d", 4)])
    assert [f["n"] for f in await asyncio.wait_for(waiting, 1)] == [2, 3, 4]
    inbox.put_first([])
    later = asyncio.ensure_future(inbox.take())
    await asyncio.sleep(0)
    assert not later.done()  # an empty replay wakes nobody for nothing
    later.cancel()
