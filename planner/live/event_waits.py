"""Waiting for a project's next events (docs/events.md#the-feed), on the event loop.

The same road as a question's wait (``planner/live/question_waits.py``): a waiter listens for the
project's news through the hub, which the tracker's ``events_recorded`` signal tells once events
are committed, in this process or any other (through the relay), and reads the feed again when
woken. No poll: with the channel layer down, a wait hears only this process and reads again every
``DEAF_READ_SECONDS``. Each read runs on the database threads and checks the reader's access anew.

A waiter here reads for itself (MCP's ``wait_for_events``, whose read is the tool's); REST's waits
and streams share one read per wake among the waiters of a project (``event_feed.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from planner.ground.bridge import db
from planner.live.hub import hub
from tracker.event_selectors import EventPage

MAX_WAIT_SECONDS = 60
DEAF_READ_SECONDS = 1.0


def events_topic(project_id: int) -> str:
    return f"events.{project_id}"


def events_recorded_receiver(sender: Any, *, project_ids: list[int], **kwargs: Any) -> None:
    """Events were committed: wake the waiters of each project's feed, here and elsewhere."""
    for project_id in project_ids:
        hub.tell_from_sync(events_topic(project_id))


async def events_await(
    *, project_id: int, read: Callable[[int], EventPage], after: int, seconds: float
) -> EventPage:
    """The events after ``after`` as soon as there are some, or none once ``seconds`` (at most 60)
    have passed. ``read(after)`` reads them on the database threads (and raises what the reader's
    access check raises)."""
    deadline = time.monotonic() + max(0.0, min(float(seconds), MAX_WAIT_SECONDS))
    async with hub.listening(events_topic(project_id)) as listener:
        # Listening from before the first read: an event committed meanwhile is read, or wakes it.
        page = await db(read)(after)
        while not page.events and (remaining := deadline - time.monotonic()) > 0:
            await listener.heard_within(remaining, deaf_every=DEAF_READ_SECONDS)
            page = await db(read)(page.next)
    return page
