"""What a server process runs beside its requests, started with the server and stopped with it:
the planner's hub (``planner/live/hub.py``), the MCP session manager and, in the embedded mode,
which runs no Celery beat nor worker, the sweep that ends claims whose lease ran out
(docs/domain.md#work), the sender of webhook deliveries (docs/events.md#webhooks) and the fetches
of linked repositories (SPEC § 16).

Servers that send the ASGI lifespan events start and stop them there. Daphne sends none: the
first connection it serves starts them, once, on the server's one event loop, and they end
with the process. A test starts them around its own event loop (``tests/conftest.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from planner.ground import ending
from planner.ground.bridge import db
from planner.live.hub import hub
from planner.mcp_server.app import mcp_app
from tracker.mail import mail_sender
from tracker.services import repositories
from tracker.services.webhooks import SendRun, bell, deliveries_send
from tracker.services.work import claims_expire

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class _Background:
    """A task on the server's event loop beside its requests: started once, cancelled within a
    bound at stop (``planner/ground/ending.py``). A subclass gives ``_run`` and names ``what``."""

    what = "a background task"

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    @property
    def started(self) -> bool:
        return self._task is not None

    async def start(self) -> None:
        if self._task is None:
            self._starting()
            context = contextvars.Context()  # it outlives whatever request started the server
            self._task = asyncio.get_running_loop().create_task(self._run(), context=context)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            self._ending()
            await ending.cancelled([task], self.what)

    def _starting(self) -> None:
        """Before the task starts."""

    def _ending(self) -> None:
        """Before the task is cancelled."""

    async def _run(self) -> None:
        raise NotImplementedError


class LeaseSweep(_Background):
    """Every ``interval`` seconds, end the claims whose lease ran out (``claims_expire``, on the
    runner's database threads). What Celery beat does in production (``tracker.expire_claims``);
    a sweep that fails is logged and the next one runs."""

    what = "the sweep of expired claims"

    def __init__(self, interval: float = 30.0) -> None:
        super().__init__()
        self.interval = interval

    async def sweep(self) -> int:
        """One sweep: how many claims it ended (0 when it failed)."""
        try:
            return await db(claims_expire)()
        except Exception:
            logger.exception(
                "the sweep of claims whose lease ran out failed; the next one runs in %ss", self.interval
            )
            return 0

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            ended = await self.sweep()
            if ended:
                logger.info("%s claims expired: their lease ran out", ended)


lease_sweep = LeaseSweep()


class WebhookDeliveries(_Background):
    """The embedded server sends its webhooks' deliveries itself, as production's worker does
    (``tracker.deliver_webhooks``): woken by ``bell`` once deliveries commit, and when the next
    retry is due (every ``tick`` seconds at most: another process may have queued some). Each run
    is ``deliveries_send`` on a thread of its own, never on the event loop; a run that fails is
    logged and the next one runs."""

    what = "the webhook deliveries"

    def __init__(self, tick: float = 60.0, first: float = 60.0) -> None:
        super().__init__()
        self.tick, self.first = tick, first
        self._stopping = threading.Event()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webhook-deliveries")

    def _starting(self) -> None:
        self._stopping = threading.Event()

    def _ending(self) -> None:
        """The run on its way takes no new delivery and finishes those it sent, on its thread."""
        self._stopping.set()

    async def run(self) -> float:
        """One run: the seconds until the next delivery may be due."""
        try:
            sent = await asyncio.get_running_loop().run_in_executor(self._thread, _send, self._stopping)
        except Exception:
            logger.exception("sending webhook deliveries failed; the next run is in %ss", self.tick)
            return self.tick
        if sent.next_due is None:
            return self.tick
        return min(self.tick, max(0.5, (sent.next_due - timezone.now()).total_seconds()))

    async def _run(self) -> None:
        woken = bell.listen()
        try:
            wait = self.first
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), timeout=wait)
                woken.clear()
                wait = await self.run()
        finally:
            bell.forget(woken)


def _send(stopping: threading.Event) -> SendRun:
    close_old_connections()
    try:
        return deliveries_send(stop=stopping)
    finally:
        close_old_connections()


webhook_deliveries = WebhookDeliveries()


class RepositoryFetches(_Background):
    """The embedded server fetches its linked repositories itself, as production's worker does
    (``tracker.fetch_repositories``): every ``tick`` seconds whatever is due, and at once when an
    owner links one or asks for a fetch (``repositories.bell``); the first a tick after the start.
    Each run is on a thread of its
    own, never on the event loop; a run that fails is logged and the next one runs."""

    what = "the repository fetches"

    def __init__(self, tick: float = 60.0) -> None:
        super().__init__()
        self.tick = tick
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="repository-fetches")

    async def _run(self) -> None:
        woken = repositories.bell.listen()
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), timeout=self.tick)
                woken.clear()
                try:
                    await asyncio.get_running_loop().run_in_executor(self._thread, _fetch)
                except Exception:
                    logger.exception("fetching repositories failed; the next run is in %ss", self.tick)
        finally:
            repositories.bell.forget(woken)


def _fetch() -> int:
    close_old_connections()
    try:
        return repositories.repositories_fetch_due()
    finally:
        close_old_connections()


repository_fetches = RepositoryFetches()


async def start() -> None:
    await hub.start()
    try:
        await mcp_app.lifetime.start()
    except BaseException:
        await hub.stop()
        raise
    if not settings.PRODUCTION_MODE:  # production's Celery beat runs tracker.expire_claims
        await lease_sweep.start()
        await webhook_deliveries.start()  # and its worker tracker.deliver_webhooks
        await mail_sender.start(run=db)  # and tracker.send_mail, tracker.send_digests
        await repository_fetches.start()  # and tracker.fetch_repositories


async def stop() -> None:
    """Each part stops within a bound (``planner/ground/ending.py``), and the hub stops whatever
    came before it: a process that cannot stop cannot start again either."""
    try:
        await lease_sweep.stop()
        await webhook_deliveries.stop()
        await mail_sender.stop()
        await repository_fetches.stop()
        await mcp_app.lifetime.close()
    finally:
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
