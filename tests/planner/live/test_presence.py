"""Which processes watch a session (planner/live/presence.py, production mode): the look at
many sessions in one round trip, and the look every few seconds at the turns nobody elsewhere
watched."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
import redis
from django.conf import settings

from planner.ground.process import PROCESS_ID
from planner.live import presence as presence_module
from planner.live.presence import Presence, _watchers_key
from tests.planner.conftest import eventually

pytestmark = pytest.mark.skipif(
    not settings.PRODUCTION_MODE, reason="presence is kept in Redis (production mode)"
)


@pytest.fixture
async def presence():
    here = Presence(settings.SERVER.redis_url or "")
    yield here
    await here.close()


async def watched_by(presence: Presence, session: uuid.UUID, process: str, *, seconds: float = 60) -> None:
    await presence.client.zadd(_watchers_key(session), {process: time.time() + seconds})
    await presence.client.expire(_watchers_key(session), 120)


async def test_many_sessions_are_asked_about_in_one_look(presence, monkeypatch):
    elsewhere, here_only, expired, nobody, both = (uuid.uuid4() for _ in range(5))
    await watched_by(presence, elsewhere, "another-process")
    await watched_by(presence, here_only, PROCESS_ID)
    await watched_by(presence, expired, "another-process", seconds=-1)
    await watched_by(presence, both, PROCESS_ID)
    await watched_by(presence, both, "another-process")
    monkeypatch.setattr(presence_module, "LOOK_KEYS", 2)  # and across script calls
    sessions = [elsewhere, here_only, expired, nobody, both]
    assert await presence.watched_elsewhere_of(sessions) == [True, False, False, False, True]
    assert await presence.watched_elsewhere(here_only) is False
    assert await presence.watched_elsewhere(both) is True
    assert await presence.watched_elsewhere_of([]) == []


async def test_redis_that_cannot_say_counts_as_watched(presence, monkeypatch):
    async def failing(**_kwargs):
        raise redis.ConnectionError("gone")

    monkeypatch.setattr(presence, "_watched_elsewhere", failing)
    assert await presence.watched_elsewhere_of([uuid.uuid4(), uuid.uuid4()]) == [True, True]


async def test_a_followed_session_is_told_once_when_a_process_elsewhere_watches_it(presence, monkeypatch):
    monkeypatch.setattr(presence_module, "LOOK_SECONDS", 0.05)
    watched, unwatched, dropped = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    told: list[uuid.UUID] = []
    presence.when_watched(watched, lambda: told.append(watched))
    presence.when_watched(unwatched, lambda: told.append(unwatched))
    unfollow = presence.when_watched(dropped, lambda: told.append(dropped))
    await asyncio.sleep(0.15)
    assert told == []
    unfollow()  # its turn ended
    await watched_by(presence, dropped, "another-process")
    await watched_by(presence, watched, "another-process")  # a page elsewhere opens the chat
    await eventually(lambda: told == [watched], 2.0)
    await asyncio.sleep(0.15)
    assert told == [watched]  # once, and never for the session no longer followed
    assert presence._looking is not None  # still looking for the one left


async def test_the_look_stops_when_nothing_is_followed_and_starts_again_after(presence, monkeypatch):
    monkeypatch.setattr(presence_module, "LOOK_SECONDS", 0.05)
    session = uuid.uuid4()
    unfollow = presence.when_watched(session, lambda: None)
    unfollow()
    await eventually(lambda: presence._looking is None, 2.0)
    told: list[bool] = []
    presence.when_watched(session, lambda: told.append(True))
    await watched_by(presence, session, "another-process")
    await eventually(lambda: told == [True], 2.0)
    await eventually(lambda: presence._looking is None, 2.0)
