"""Is a turn's process still running it? One signal: the turn's heartbeat in its session row.

The process running a turn writes the turn's ``heartbeat_at`` every
``HEARTBEAT_SECONDS`` (``planner/live/heartbeat.py``, one statement for all its
turns), and with every step it saves. A turn whose heartbeat is older than
``DEAD_AFTER`` has lost its process (killed, hung, cut off from the
database) and may be recovered. Nothing else counts: a process that is
briefly unreachable over Redis keeps its turns, and a turn of this process
is alive exactly while the registry of local turns (``planner/live/turns.py``)
holds it. In the embedded mode there is one process, so a turn owned by
any other is one whose process is gone.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from planner.live.identity import PROCESS_ID
from planner.live.turns import turns

HEARTBEAT_SECONDS = 3.0
DEAD_AFTER = timedelta(seconds=15)  # five beats missed


def owner_alive(*, session_id: uuid.UUID, owner: str, heartbeat_at: datetime | None) -> bool:
    """Is the process that runs the session's turn still running it?"""
    if owner == PROCESS_ID:
        return turns.runs(session_id)
    if not settings.PRODUCTION_MODE or not owner or heartbeat_at is None:
        return False
    return timezone.now() - heartbeat_at < DEAD_AFTER
