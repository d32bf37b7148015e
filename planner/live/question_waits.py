"""Waiting for a question's outcome (docs/domain.md#agents-questions), on the event loop.

A wait holds no thread and no database connection: it listens for the question's news through
the hub (:meth:`~planner.live.hub.Hub.listening`), which the domain's ``question_settled`` signal
tells once an outcome is committed, in this process or any other (through the relay), and reads
the question's status when woken. No poll: with the channel layer down, a wait hears only this
process and reads again every ``DEAF_READ_SECONDS``. It reads through a function of the caller's,
on the database threads, that answers the status alone: what crosses to the event loop is a
string (docs/architecture.md#one-bridge).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from planner.ground.bridge import db
from planner.live.hub import hub

MAX_WAIT_SECONDS = 60
DEAF_READ_SECONDS = 1.0
OPEN = "open"  # planner.models.QuestionStatus.OPEN: the one status a wait waits out


def question_topic(question_id: int) -> str:
    return f"question.{question_id}"


def question_settled_receiver(sender: Any, *, question_id: int, **kwargs: Any) -> None:
    """The domain committed the question's outcome: wake its waiters, here and elsewhere."""
    hub.tell_from_sync(question_topic(question_id))


async def question_await(*, question_id: int, status: Callable[[], str], seconds: float) -> str:
    """Wait until the question is no longer open, or ``seconds`` (at most 60) have passed; its
    status then. ``status`` reads it on the database threads (and raises what the caller's access
    check raises: a question the caller may no longer read ends the wait with that error)."""
    deadline = time.monotonic() + max(0.0, min(float(seconds), MAX_WAIT_SECONDS))
    async with hub.listening(question_topic(question_id)) as listener:
        # Listening from before the first read: an outcome committed meanwhile is read, or wakes it.
        current = await db(status)()
        while current == OPEN and (remaining := deadline - time.monotonic()) > 0:
            await listener.heard_within(remaining, deaf_every=DEAF_READ_SECONDS)
            current = await db(status)()
    return current
