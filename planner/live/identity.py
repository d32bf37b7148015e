"""This process's identity: the owner named in the sessions whose turns it runs, and the
origin and numbers of the frames it sends."""

from __future__ import annotations

import itertools
import os
import secrets
import socket
import uuid

from planner.agent.frames import Frame, numbered

PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

# Increasing within a process (a watcher drops what it already has by the highest number per
# origin), and started at random so that two processes' numbers do not meet on a page that
# follows a turn of one process and then a recovery notice from another.
_frame_numbers = itertools.count(secrets.randbelow(2**40) * 1024 + 1)


def stamped(frame: Frame) -> Frame:
    """``frame`` with this process's next frame number and its origin."""
    return numbered(frame, n=next(_frame_numbers), origin=PROCESS_ID)
