"""A local turn's frames on their way to watchers in other processes.

Frames enter the outbox only while another process watches the session: the
sender task looks for such a watcher as the turn starts (frames wait meanwhile,
so the turn's start never waits on Redis), then the process's presence looks
again every ``LOOK_SECONDS`` until one appears (one look for all its turns,
``planner/live/presence.py``), and a watcher elsewhere that arrives mid-turn
asks for a replay, which turns publishing on at once (:meth:`Outbox.watched`). One sender task
drains the outbox in order: the turn never waits on the channel layer, and a
backlog goes out as one message. In the embedded mode there is no other
process, and the relay hands out a :class:`NoOutbox`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import uuid

from planner.agent.frames import Frame
from planner.live.broadcast import Broadcast
from planner.live.presence import Presence

logger = logging.getLogger(__name__)

MAX_BATCH = 256
PUBLISH_ATTEMPTS = 5
PUBLISH_RETRY_SECONDS = 0.05


class NoOutbox:
    """Nobody elsewhere: frames reach only this process's watchers."""

    def put(self, frame: Frame) -> None:
        pass

    def watched(self) -> None:
        pass

    async def close(self) -> None:
        pass


class Outbox:
    def __init__(self, session_id: uuid.UUID, presence: Presence, broadcast: Broadcast) -> None:
        self.session_id = session_id
        self._presence = presence
        self._broadcast = broadcast
        self.watched_elsewhere: bool | None = None  # None until the first look: frames wait
        self._queue: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._sender = asyncio.get_running_loop().create_task(self._send(), context=contextvars.Context())

    @classmethod
    async def open(cls, session_id: uuid.UUID, presence: Presence, broadcast: Broadcast) -> Outbox:
        """The outbox of a turn starting now, publishing from its first frame if a process
        elsewhere watches."""
        return cls(session_id, presence, broadcast)

    def put(self, frame: Frame) -> None:
        if self.watched_elsewhere is not False:
            self._queue.put_nowait(frame)

    def watched(self) -> None:
        """A process elsewhere watches the session: publish from now on, without waiting for a check."""
        self.watched_elsewhere = True

    async def close(self) -> None:
        """Publish what is left, then stop."""
        self._queue.put_nowait(None)
        await asyncio.shield(self._sender)

    async def _send(self) -> None:
        if not await self._first_look():
            return
        unfollow = None
        if not self.watched_elsewhere:  # the frames put are dropped until the presence finds someone
            unfollow = self._presence.when_watched(self.session_id, self.watched)
        try:
            while True:
                batch = [await self._queue.get()]
                while len(batch) < MAX_BATCH and not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                out = [frame for frame in batch if frame is not None]
                if out:
                    await self._publish(out)
                if batch[-1] is None:
                    return
        finally:
            if unfollow is not None:
                unfollow()

    async def _first_look(self) -> bool:
        """Whether a process elsewhere watches, asked once as the turn starts; the frames put
        meanwhile go if one does, and are dropped if none does. False if the outbox closed
        meanwhile and nothing is left to send."""
        elsewhere = await self._presence.watched_elsewhere(self.session_id)  # True when unsure
        self.watched_elsewhere = bool(self.watched_elsewhere) or elsewhere
        if self.watched_elsewhere:
            return True
        while not self._queue.empty():
            if self._queue.get_nowait() is None:
                return False
        return True

    async def _publish(self, batch: list[Frame]) -> None:
        """Publish ``batch``, retrying a failing channel layer (a busy Redis pool) before giving up:
        watchers elsewhere that miss frames reload when their relay reconnects."""
        for attempt in range(PUBLISH_ATTEMPTS):
            try:
                await self._broadcast.publish(self.session_id, batch)
                return
            except Exception:
                if attempt == PUBLISH_ATTEMPTS - 1:
                    logger.warning("could not publish %d frames of session %s", len(batch), self.session_id)
                    return
                await asyncio.sleep(PUBLISH_RETRY_SECONDS * 2**attempt)
