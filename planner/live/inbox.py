"""What one watcher of a session reads: its inbox, and which frames it already has."""

from __future__ import annotations

import asyncio

from planner.agent.frames import Frame


class Inbox:
    """Frames waiting for one watcher. Lighter than an ``asyncio.Queue`` (an idle watcher holds
    one), and :meth:`take` hands over everything waiting at once. A watch that can no longer be
    served (its process lost the channel layer) is :meth:`end`-ed with the error to raise."""

    __slots__ = ("_ended", "_frames", "_waiter")

    def __init__(self, frames: list[Frame] | None = None) -> None:
        self._frames: list[Frame] = list(frames or ())
        self._waiter: asyncio.Future[None] | None = None
        self._ended: Exception | None = None

    def put(self, batch: list[Frame]) -> None:
        self._frames.extend(batch)
        self._wake()

    def put_first(self, batch: list[Frame]) -> None:
        """``batch`` before anything already waiting (a replay of what came earlier)."""
        self._frames[:0] = batch
        self._wake()

    def end(self, error: Exception) -> None:
        """Make the next :meth:`take` raise ``error``."""
        self._ended = error
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def take(self) -> list[Frame]:
        while not self._frames and self._ended is None:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if self._ended is not None:
            raise self._ended
        batch, self._frames = self._frames, []
        return batch

    def _wake(self) -> None:
        if self._frames and self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class Seen:
    """Which frames a watcher already has: the highest number per sending process.

    A frame can reach a watcher twice: from a local turn directly and back over
    the channel layer, or in a replay and live. The second copy is dropped.
    """

    __slots__ = ("highest",)

    def __init__(self) -> None:
        self.highest: dict[str, int] = {}

    def fresh(self, batch: list[Frame]) -> list[Frame]:
        out = []
        for frame in batch:
            origin, number = frame.get("origin", ""), frame.get("n", 0)
            if number and number <= self.highest.get(origin, 0):
                continue
            if number:
                self.highest[origin] = number
            out.append(frame)
        return out
