"""The heartbeat of this process's turns: the one liveness signal (``planner/liveness.py``).

While any turn runs here, one task writes ``heartbeat_at`` for all of them
every ``HEARTBEAT_SECONDS``, in one statement (hundreds of turns that started
together would otherwise beat together), and stops when the last one ends.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging

from planner import services
from planner.background import running_here
from planner.executor import db
from planner.identity import PROCESS_ID
from planner.live import turns
from planner.liveness import HEARTBEAT_SECONDS

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
        sessions = turns.sessions()
        if not sessions:
            return
        try:
            await db(services.heartbeat)(session_ids=sessions, owner=PROCESS_ID)
        except Exception:
            logger.exception("the heartbeat of %d turns failed", len(sessions))
