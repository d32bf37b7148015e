"""Ending what runs beside a process's requests within a bound: a stop that waits on a task which
never ends (a Redis connection that hangs, a library that swallows its cancellation) would hold
the server's shutdown, and a test's, forever."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from typing import Any

logger = logging.getLogger(__name__)

STOP_SECONDS = 5.0


async def ended(tasks: Iterable[asyncio.Future[Any]], what: str, *, within: float | None = None) -> bool:
    """Wait up to ``within`` seconds for ``tasks`` to end (cancelled or not, by the caller); those
    still running then are left behind, and logged. True when all ended."""
    within = STOP_SECONDS if within is None else within
    waiting = {task for task in tasks if not task.done()}
    if not waiting:
        return True
    _, pending = await asyncio.wait(waiting, timeout=within)
    for task in waiting - pending:
        if not task.cancelled():
            task.exception()  # retrieved: an error on the way out is no one's to report
    if pending:
        logger.warning("%d of %s did not end within %ss; left behind", len(pending), what, within)
    return not pending


async def cancelled(tasks: Iterable[asyncio.Future[Any]], what: str, *, within: float | None = None) -> bool:
    """Cancel ``tasks`` and wait, within the bound, for them to end."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    return await ended(tasks, what, within=within)


async def bounded(call: Awaitable[Any], what: str, *, within: float | None = None) -> bool:
    """Run ``call`` as a task and give it ``within`` seconds; it is cancelled if it runs longer."""
    within = STOP_SECONDS if within is None else within
    task = asyncio.ensure_future(call)
    if await ended([task], what, within=within):
        return True
    return await cancelled([task], what, within=0.5)
