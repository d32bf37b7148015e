"""Waiting for a question's outcome (docs/domain.md#agents-questions), on the event loop.

A wait holds no thread and no database connection: it sleeps on an event that this process sets
once a question's outcome is committed here (:func:`question_settled`, which the question services
call on commit), and reads the question's status again at least every second for outcomes given
in other processes. It reads through a function of the caller's, on the database threads, that
answers the status alone: what crosses to the event loop is a string (docs/architecture.md#one-bridge).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from planner.live.bridge import db

MAX_WAIT_SECONDS = 60
POLL_SECONDS = 1.0
OPEN = "open"  # planner.models.QuestionStatus.OPEN: the one status a wait waits out

_waiters: dict[int, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}


def question_settled(question_id: int) -> None:
    """Wake this process's waiters of the question (from any thread)."""
    for loop, event in list(_waiters.get(question_id, ())):
        loop.call_soon_threadsafe(event.set)


async def question_await(*, question_id: int, status: Callable[[], str], seconds: float) -> str:
    """Wait until the question is no longer open, or ``seconds`` (at most 60) have passed; its
    status then. ``status`` reads it on the database threads (and raises what the caller's access
    check raises: a question the caller may no longer read ends the wait with that error)."""
    deadline = time.monotonic() + max(0.0, min(float(seconds), MAX_WAIT_SECONDS))
    entry = (asyncio.get_running_loop(), asyncio.Event())
    _waiters.setdefault(question_id, set()).add(entry)
    try:
        # Waiting from before the first read: an outcome committed meanwhile is read, or wakes it.
        current = await db(status)()
        for _ in range(int(MAX_WAIT_SECONDS / POLL_SECONDS) + 2):  # bounded: the deadline ends it first
            remaining = deadline - time.monotonic()
            if current != OPEN or remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(entry[1].wait(), timeout=min(remaining, POLL_SECONDS))
            entry[1].clear()
            current = await db(status)()
    finally:
        waiters = _waiters[question_id]
        waiters.discard(entry)
        if not waiters:
            del _waiters[question_id]
    return current
