"""This process's identity, the turns it runs, and whether another turn's process is alive."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
HEARTBEAT_SECONDS = 10.0
DEAD_AFTER = timedelta(seconds=45)

# Sessions whose turn runs in this process right now.
LOCAL_TURNS: set[uuid.UUID] = set()


def running_here(task: asyncio.Task[Any] | None) -> bool:
    """Does this process-wide background task still run, on the running event loop? (Tests
    run on a loop each, and a task of a closed loop never finishes.)"""
    return task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop()


def owner_alive(*, session_id: uuid.UUID, owner: str, heartbeat_at: datetime | None) -> bool:
    """Is the process that runs the session's turn still running it?

    In this process the answer is exact. In the embedded mode there is no
    other process, so another owner is a process that died. In production
    another process is alive while it keeps its presence in Redis and the
    turn's heartbeat is recent (a live process whose turn hangs is caught too).
    """
    if owner == PROCESS_ID:
        return session_id in LOCAL_TURNS
    if not settings.PRODUCTION_MODE or not owner or heartbeat_at is None:
        return False
    if timezone.now() - heartbeat_at >= DEAD_AFTER:
        return False
    from planner.presence import process_alive

    return process_alive(owner)
