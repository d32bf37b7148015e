"""This process, as the domain sees it: the owner named in the sessions whose turns it runs, the
turns it runs and the transcripts it keeps between them, and whether a turn's owner is alive.

Liveness has one signal, the turn's heartbeat in its session row: the hub writes
``heartbeat_at`` for all this process's turns in one statement every ``HEARTBEAT_SECONDS``
(``hub.py``), and a turn whose heartbeat is older than ``DEAD_AFTER`` has lost its process
(killed, hung, cut off from the database) and may be recovered. Nothing else counts: a process
briefly unreachable over Redis keeps its turns, and a turn of this process is alive exactly
while :data:`turns` holds it. In the embedded mode there is one process, so a turn owned by any
other is one whose process is gone.

The registries are the hub's to change (it starts and ends turns); the domain only reads them,
inside its transactions (``planner/domain/services/sessions/``, ``planner/domain/selectors.py``).
"""

from __future__ import annotations

import itertools
import os
import secrets
import socket
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from planner.agent.frames import Frame, numbered
from planner.ground.histories import Histories
from planner.ground.turns import LiveTurns

PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
HEARTBEAT_SECONDS = 3.0
DEAD_AFTER = timedelta(seconds=15)  # five beats missed

# Increasing within a process (a watcher drops what it already has by the highest number per
# origin), and started at random so that two processes' numbers do not meet on a page that
# follows a turn of one process and then a recovery notice from another.
_frame_numbers = itertools.count(secrets.randbelow(2**40) * 1024 + 1)

turns = LiveTurns()
histories = Histories()


def stamped(frame: Frame) -> Frame:
    """``frame`` with this process's next frame number and its origin."""
    return numbered(frame, n=next(_frame_numbers), origin=PROCESS_ID)


def owner_alive(*, session_id: uuid.UUID, owner: str, heartbeat_at: datetime | None) -> bool:
    """Is the process that runs the session's turn still running it?"""
    if owner == PROCESS_ID:
        return turns.runs(session_id)
    if settings.ONE_PROCESS or not owner or heartbeat_at is None:
        return False
    return timezone.now() - heartbeat_at < DEAD_AFTER
