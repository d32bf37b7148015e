"""A local turn's outbox (planner/live/outbox.py): the turn's start never waits for the look at
who watches elsewhere, and no frame is lost or sent for nobody because of it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from planner.agent import frames
from planner.live.outbox import Outbox


class Presence:
    """Who watches elsewhere, answered when the test says so; the sessions followed after it."""

    def __init__(self) -> None:
        self.answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.asked = 0
        self.followed: dict[object, Callable[[], None]] = {}

    async def watched_elsewhere(self, session_id: object) -> bool:
        self.asked += 1
        return await asyncio.shield(self.answer) if self.asked == 1 else self.answer.result()

    def when_watched(self, session_id: object, then: Callable[[], None]) -> Callable[[], None]:
        self.followed[session_id] = then

        def unfollow() -> None:
            self.followed.pop(session_id, None)

        return unfollow


class Broadcast:
    def __init__(self) -> None:
        self.published: list[list[Any]] = []

    async def publish(self, session_id: uuid.UUID, batch: list[Any]) -> None:
        self.published.append(batch)


def texts(broadcast: Broadcast) -> list[str]:
    return [frame["text"] for batch in broadcast.published for frame in batch]


async def test_frames_put_before_the_first_look_reach_a_watcher_elsewhere():
    presence, broadcast = Presence(), Broadcast()
    outbox = await Outbox.open(uuid.uuid4(), presence, broadcast)  # type: ignore[arg-type]
    outbox.put(frames.text_delta("a"))  # the turn runs while Redis is asked
    outbox.put(frames.text_delta("b"))
    presence.answer.set_result(True)
    outbox.put(frames.text_delta("c"))
    await outbox.close()
    assert texts(broadcast) == ["a", "b", "c"]


async def test_nothing_is_published_when_nobody_watches_elsewhere():
    presence, broadcast = Presence(), Broadcast()
    outbox = await Outbox.open(uuid.uuid4(), presence, broadcast)  # type: ignore[arg-type]
    outbox.put(frames.text_delta("a"))
    presence.answer.set_result(False)
    await asyncio.sleep(0)
    outbox.put(frames.text_delta("b"))
    await outbox.close()
    assert broadcast.published == []


async def test_a_replay_asked_during_the_first_look_publishes_everything():
    presence, broadcast = Presence(), Broadcast()
    outbox = await Outbox.open(uuid.uuid4(), presence, broadcast)  # type: ignore[arg-type]
    outbox.put(frames.text_delta("a"))
    outbox.watched()  # a watcher elsewhere asked for a replay before Redis answered
    presence.answer.set_result(False)  # the look began before that watcher arrived
    outbox.put(frames.text_delta("b"))
    await outbox.close()
    assert texts(broadcast) == ["a", "b"]


async def test_an_outbox_closed_before_the_first_look_answers_ends_with_it():
    presence, broadcast = Presence(), Broadcast()
    outbox = await Outbox.open(uuid.uuid4(), presence, broadcast)  # type: ignore[arg-type]
    outbox.put(frames.text_delta("a"))
    closing = asyncio.ensure_future(outbox.close())
    await asyncio.sleep(0.01)
    assert not closing.done()  # it waits for the answer: the frames may be for someone
    presence.answer.set_result(False)
    await asyncio.wait_for(closing, 1)
    assert broadcast.published == []


async def test_frames_after_someone_elsewhere_is_found_watching_mid_turn_are_published():
    presence, broadcast = Presence(), Broadcast()
    session = uuid.uuid4()
    outbox = await Outbox.open(session, presence, broadcast)  # type: ignore[arg-type]
    presence.answer.set_result(False)
    outbox.put(frames.text_delta("a"))
    await asyncio.sleep(0)
    assert list(presence.followed) == [session]  # looked at again with the process's other turns
    presence.followed[session]()  # the presence's look found a watcher elsewhere
    outbox.put(frames.text_delta("b"))
    await outbox.close()
    assert texts(broadcast) == ["b"]  # "a" went to nobody; the watcher's replay brings it
    assert presence.followed == {}


async def test_a_turn_watched_elsewhere_from_the_start_is_not_followed():
    presence, broadcast = Presence(), Broadcast()
    outbox = await Outbox.open(uuid.uuid4(), presence, broadcast)  # type: ignore[arg-type]
    presence.answer.set_result(True)
    outbox.put(frames.text_delta("a"))
    await outbox.close()
    assert texts(broadcast) == ["a"]
    assert presence.followed == {}


async def test_an_unwatched_turn_that_ends_is_no_longer_followed():
    presence, broadcast = Presence(), Broadcast()
    outbox = await Outbox.open(uuid.uuid4(), presence, broadcast)  # type: ignore[arg-type]
    presence.answer.set_result(False)
    await asyncio.sleep(0)
    assert len(presence.followed) == 1
    await outbox.close()
    assert presence.followed == {}
    assert broadcast.published == []
