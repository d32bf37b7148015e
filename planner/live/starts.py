"""How many turns open at once in this process (docs/architecture.md#turns-open-a-few-at-a-time).

Opening a turn is the costliest moment of its life for the process: the begin's transaction on a
database thread, its first frames, its loop set up, its first model request built and sent. Two
hundred messages arriving at once opened two hundred turns at once, and every turn already
streaming waited behind all of them. Here a message that starts a turn (``Runner.send_as``) waits
for a slot, at most ``AT_ONCE`` taken at a time, in the order they were asked for; the turn gives
its slot back as its first model request goes out (the event loop's next pass after the call
begins: the request built and written, not the model's answer awaited), or when it ends before
that. A slot held ``HOLD_SECONDS`` (a begin waiting on a lock another process holds) is given back
anyway, so a stuck start never holds up the others for long.
"""

from __future__ import annotations

import asyncio

from planner.agent.calls import Gateway, Meter, StreamSink
from planner.agent.messages import ModelRequest, ModelResponse
from planner.live.at_once import AtOnce

AT_ONCE = 2
HOLD_SECONDS = 1.0

_opening = AtOnce()


class Slot:
    """One of the turns opening at once; :meth:`release` gives it back (once, whoever calls)."""

    def __init__(self, gate: asyncio.Semaphore, loop: asyncio.AbstractEventLoop) -> None:
        self._gate = gate
        self._loop = loop
        self._timer = loop.call_later(HOLD_SECONDS, self.release)
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._timer.cancel()
            self._gate.release()

    def release_soon(self) -> None:
        """Give the slot back on the event loop's next pass: after what the caller does before it
        first waits."""
        if not self.released:
            self._loop.call_soon(self.release)


async def slot() -> Slot:
    """A slot to open a turn, once fewer than ``AT_ONCE`` are taken in this process."""
    gate = _opening.gate(AT_ONCE)
    await gate.acquire()
    return Slot(gate, asyncio.get_running_loop())


def releasing(gateway: Gateway, taken: Slot | None) -> Gateway:
    """``gateway``, giving ``taken`` back as the turn's first model request goes out."""
    return gateway if taken is None else _Releasing(gateway, taken)


class _Releasing:
    def __init__(self, inner: Gateway, taken: Slot) -> None:
        self.inner = inner
        self.taken = taken

    async def complete(
        self, request: ModelRequest, *, api_key: str | None, sink: StreamSink | None, meter: Meter
    ) -> ModelResponse:
        self.taken.release_soon()
        return await self.inner.complete(request, api_key=api_key, sink=sink, meter=meter)
