"""At most so many at a time, on each event loop: the semaphore of a limit per loop, made on its
first use there (an asyncio semaphore belongs to the loop it first waits on: the hub's, a
test's). The turns that open at once (``starts.py``) and the title calls (``titles.py``)."""

from __future__ import annotations

import asyncio
import weakref


class AtOnce:
    def __init__(self) -> None:
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def gate(self, limit: int) -> asyncio.Semaphore:
        """The running loop's semaphore, made with ``limit`` on its first use on that loop."""
        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = asyncio.Semaphore(limit)
        return gate
