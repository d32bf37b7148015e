"""Live frames over the channel layer: the only module that sends to it.

Each session has a group; every watcher of the session, in any process,
listens on a channel in that group. Control messages (stop) for a session
travel on a second group that the process running its turn listens to.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from typing import Any

from channels.layers import BaseChannelLayer, get_channel_layer

from planner.frames import Frame

FRAME = "planner.frame"
CONTROL = "planner.control"
REPLAY = "planner.replay"


def frames_group(session_id: uuid.UUID) -> str:
    return f"planner.session.{session_id.hex}"


def control_group(session_id: uuid.UUID) -> str:
    return f"planner.control.{session_id.hex}"


# channels-redis takes a connection from its pool (at most 100 with redis-py's default) for each
# call and fails at once when none is free: calls that come in bursts (one per live turn) wait
# for one of these places instead. Receiving shares one connection per process.
MAX_CONCURRENT_CALLS = 50
_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def _gate() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = asyncio.Semaphore(MAX_CONCURRENT_CALLS)
    return gate


def layer() -> BaseChannelLayer:
    channel_layer = get_channel_layer()
    if channel_layer is None:
        raise RuntimeError("CHANNEL_LAYERS is not configured")
    return channel_layer


async def publish(session_id: uuid.UUID, batch: list[Frame]) -> None:
    """Send ``batch`` (frames in order) to every watcher of the session, as one message."""
    async with _gate():
        await layer().group_send(frames_group(session_id), {"type": FRAME, "frames": batch})


async def send_control(session_id: uuid.UUID, command: str, **data: Any) -> None:
    """Ask the process running the session's turn to do ``command`` (``stop``)."""
    async with _gate():
        await layer().group_send(control_group(session_id), {"type": CONTROL, "command": command, **data})


async def send_to(channel: str, message: dict[str, Any]) -> None:
    """Send ``message`` to one channel (a watcher's, answering its replay request)."""
    async with _gate():
        await layer().send(channel, message)


async def join(group: str) -> str:
    """A new channel in ``group``; the caller reads it with :func:`receive` and leaves with :func:`leave`."""
    # The default prefix: channels-redis serves all of a process's channels with one receive loop.
    async with _gate():
        channel = await layer().new_channel()
        await layer().group_add(group, channel)
    return channel


async def receive(channel: str) -> dict[str, Any]:
    message: dict[str, Any] = await layer().receive(channel)
    return message


async def leave(group: str, channel: str) -> None:
    async with _gate():
        await layer().group_discard(group, channel)
