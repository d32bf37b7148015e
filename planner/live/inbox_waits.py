"""Following one user's inbox count (docs/events.md#people), on the event loop: the header's badge.

The same road as the other waits (``planner/live/question_waits.py``): the stream listens for the
user's news through the hub, which the tracker's ``inbox_changed`` signal tells once notifications
are committed, in this process or any other (through the relay), and reads the count again when
woken. No poll: with the channel layer down it hears only this process and reads again every
``DEAF_READ_SECONDS``. Each read runs on the database threads and reads the user's access anew.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

from planner.ground.bridge import db
from planner.live.hub import hub

DEAF_READ_SECONDS = 5.0


def inbox_topic(user_id: int) -> str:
    return f"inbox.{user_id}"


def inbox_changed_receiver(sender: Any, *, user_ids: list[int], **kwargs: Any) -> None:
    """Inboxes changed: wake the streams of each user's count, here and elsewhere."""
    for user_id in user_ids:
        hub.tell_from_sync(inbox_topic(user_id))


async def inbox_follow(
    *, user_id: int, count: Callable[[], int], idle_seconds: float, for_seconds: float
) -> AsyncGenerator[int | None, None]:
    """The user's count now, then again each time their inbox changes, and None whenever
    ``idle_seconds`` pass without one (for the caller to keep its connection alive); it ends after
    ``for_seconds`` (the browser reconnects). ``count`` reads it on the database threads."""
    deadline = time.monotonic() + for_seconds
    async with hub.listening(inbox_topic(user_id)) as listener:
        # Listening from before the first read: a change committed meanwhile is read, or wakes it.
        last = await db(count)()
        yield last
        quiet_since = time.monotonic()
        while (remaining := deadline - time.monotonic()) > 0:
            idle = max(0.0, idle_seconds - (time.monotonic() - quiet_since))
            heard = await listener.heard_within(min(remaining, idle), deaf_every=DEAF_READ_SECONDS)
            if heard or listener.deaf:
                current = await db(count)()
                if heard or current != last:
                    last = current
                    quiet_since = time.monotonic()
                    yield current
                    continue
            if time.monotonic() - quiet_since >= idle_seconds:
                quiet_since = time.monotonic()
                yield None
