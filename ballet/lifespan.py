"""What a server process runs beside its requests, started with the server and stopped with it:
the planner's hub (``planner/live/hub.py``) and the MCP session manager.

Servers that send the ASGI lifespan events start and stop them there. Daphne sends none: the
first connection it serves starts them, once, on the server's one event loop, and they end
with the process. A test starts them around its own event loop (``tests/conftest.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

from planner.live.hub import hub
from planner.mcp_server.app import mcp_app

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


async def start() -> None:
    await hub.start()
    try:
        await mcp_app.lifetime.start()
    except BaseException:
        await hub.stop()
        raise


async def stop() -> None:
    await mcp_app.lifetime.close()
    await hub.stop()


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[None]:
    """The process's live side, running on this event loop for as long as the block does."""
    await start()
    try:
        yield
    finally:
        await stop()


class Lifespan:
    """``app`` with the process's live side started before anything it serves."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._starting: asyncio.Lock | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if not hub.started:
            await self._start_once()
        await self.app(scope, receive, send)

    async def _start_once(self) -> None:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if not hub.started:
                await start()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await start()
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await stop()
                await send({"type": "lifespan.shutdown.complete"})
                return
