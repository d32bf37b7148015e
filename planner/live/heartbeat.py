"""The heartbeat of this process's turns: the one liveness signal (``planner/live/liveness.py``).

While any turn runs here, one task writes ``heartbeat_at`` for all of them
every ``HEARTBEAT_SECONDS``, in one statement (hundreds of turns that started
together would otherwise beat together), and stops when the last one ends.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging

from planner.live.background import running_here
from planner.live.bridge import db
from planner.live.identity import PROCESS_ID
from planner.live.liveness import HEARTBEAT_SECONDS
from planner.live.turns import turns
from planner.services import sessions

logger = logging.getLogger(__name__)

_beating: asyncio.Task[None] | None = None


def keep_beating() -> None:
    """Make sure the heartbeat runs (a turn just started here)."""
    global _beating  # noqa: PLW0603 - one heartbeat per process
    if not running_here(_beating):
        _beating = asyncio.get_running_loop().create_task(_beat(), context=contextvars.Context())


async def _beat() -> None:
    while True:
        await asyncio.sleep(HEARTBEAT_SECONDS)
        running = turns.sessions()
        if not running:
            return
        try:
            await db(sessions.heartbeat)(session_ids=running, owner=PROCESS_ID)
        except Exception:
            logger.exception("the heartbeat of %d turns failed", len(running))
