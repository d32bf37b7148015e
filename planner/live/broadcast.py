"""Live frames and news over the channel layer: the only module that talks to it.

Each session has a frames group, joined by every process that has watchers of
the session, and a control group, joined by the process running its turn
(``stop``, ``replay``). Each topic of news (``question.12``: a question was
settled) has a news group, joined by every process where someone waits for it.
A process listens on one channel (``planner/live/relay.py``); every message
names its session or its topic.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import BaseChannelLayer, channel_layers, get_channel_layer

from planner.agent.frames import Frame

FRAME = "planner.frame"
CONTROL = "planner.control"
REPLAY = "planner.replay"
NEWS = "planner.news"


def frames_group(session_id: uuid.UUID) -> str:
    return f"planner.session.{session_id.hex}"


def control_group(session_id: uuid.UUID) -> str:
    return f"planner.control.{session_id.hex}"


def news_group(topic: str) -> str:
    return f"planner.news.{topic}"


def layer() -> BaseChannelLayer:
    channel_layer = get_channel_layer()
    if channel_layer is None:
        raise RuntimeError("CHANNEL_LAYERS is not configured")
    return channel_layer


# channels-redis takes a connection from its pool (at most 100 with redis-py's default) for each
# call and fails at once when none is free: calls that come in bursts (one per live turn) wait
# for one of these places instead. Receiving shares one connection per process.
MAX_CONCURRENT_CALLS = 50


class Broadcast:
    """This process's calls to the channel layer, at most ``MAX_CONCURRENT_CALLS`` at a time (one
    per relay: a relay serves one event loop)."""

    def __init__(self) -> None:
        self._gate = asyncio.Semaphore(MAX_CONCURRENT_CALLS)
        self._receiver: BaseChannelLayer | None = None

    def _receiving(self) -> BaseChannelLayer:
        """The layer this relay's channel is made, joined and read with. channels-redis keeps
        what a receive leaves behind per layer, not per event loop: a received message's clean-up
        task holds the channel's lock until it ends, and a receive cancelled while it waited for
        that lock leaves the lock bound to its loop. A loop that ends (a worker's pass, a test)
        would leave the next loop of the process unable to receive, so each relay (one per loop)
        reads through a layer of its own. The in-memory layer holds its channels: it is shared."""
        if self._receiver is None:
            shared = layer()
            self._receiver = (
                channel_layers.make_backend(DEFAULT_CHANNEL_LAYER) if _keeps_pools(shared) else shared
            )
        return self._receiver

    async def publish(self, session_id: uuid.UUID, batch: list[Frame]) -> None:
        """Send ``batch`` (frames in order) to every process watching the session, as one message."""
        async with self._gate:
            await layer().group_send(
                frames_group(session_id), {"type": FRAME, "session": session_id.hex, "frames": batch}
            )

    async def send_control(self, session_id: uuid.UUID, command: str, **data: Any) -> None:
        """Ask the process running the session's turn to do ``command`` (``stop``, ``replay``)."""
        async with self._gate:
            await layer().group_send(
                control_group(session_id),
                {"type": CONTROL, "session": session_id.hex, "command": command, **data},
            )

    async def send_news(self, topic: str) -> None:
        """Tell every process where someone waits for ``topic`` that it happened."""
        async with self._gate:
            await layer().group_send(news_group(topic), {"type": NEWS, "topic": topic})

    async def send_to(self, channel: str, message: dict[str, Any]) -> None:
        """Send ``message`` to one channel (a process's, answering its replay request)."""
        async with self._gate:
            await layer().send(channel, message)

    async def new_channel(self) -> str:
        """A new channel of this process; read it with :meth:`receive`."""
        # The default prefix: channels-redis serves all of a layer's channels with one receive loop.
        async with self._gate:
            channel: str = await self._receiving().new_channel()
        return channel

    async def group_add(self, group: str, channel: str) -> None:
        async with self._gate:
            await self._receiving().group_add(group, channel)

    async def group_discard(self, group: str, channel: str) -> None:
        async with self._gate:
            await self._receiving().group_discard(group, channel)

    async def receive(self, channel: str) -> dict[str, Any]:
        message: dict[str, Any] = await self._receiving().receive(channel)
        return message

    async def close(self) -> None:
        """Close the relay's own layer (its clean-ups waited for, its connections closed)."""
        if self._receiver is not None and _keeps_pools(self._receiver):
            await self._receiver.close_pools()
        self._receiver = None


def _keeps_pools(channel_layer: BaseChannelLayer) -> bool:
    """A layer that talks to a server (channels-redis), not one that holds its channels."""
    return hasattr(channel_layer, "close_pools")


async def roundtrip() -> bool:
    """Whether a message sent to a new channel of this process comes back (``/healthz``)."""
    channel_layer = get_channel_layer()
    if channel_layer is None:
        return False
    # The default prefix: channels-redis reads all of a layer's channels of one prefix with a
    # single receive loop, and a channel of another prefix would wait for that loop's lock. The
    # relay reads through a layer of its own; nothing else receives with this one.
    channel = await channel_layer.new_channel()
    await channel_layer.send(channel, {"type": "healthz.ping"})
    message = await asyncio.wait_for(channel_layer.receive(channel), timeout=2)
    return message.get("type") == "healthz.ping"
