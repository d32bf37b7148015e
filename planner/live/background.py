"""Process-wide background tasks (the guard's sweep, the heartbeat, the relay's loops).

Each runs once per process, on the event loop that started it. Tests run an
event loop each, and a task of a closed loop never finishes, so "is it
running?" also asks "on this loop?".
"""

from __future__ import annotations

import asyncio
from typing import Any


def running_here(task: asyncio.Task[Any] | None) -> bool:
    """Does this background task still run, on the running event loop?"""
    return task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop()
