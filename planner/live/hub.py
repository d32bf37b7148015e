"""This process's live side, owned by one object: the :class:`Hub`.

The hub holds what a process keeps while it serves planner sessions: the turns
running here (``turns.py``), the inboxes of the watchers here (``inbox.py``),
the relay to the other processes (``relay.py``), the transcripts kept between
turns (``histories.py``) and the grants of sockets and turns (``guard.py``).
It beats for its turns and sweeps the grants, from :meth:`Hub.start` to
:meth:`Hub.stop`: the server calls them with its lifespan (``ballet/lifespan.py``),
a Celery task that runs turns around its work, a test around its event loop.

Every frame reaches a watcher by one road, :meth:`Hub.publish`: a turn's frames,
a recovery's notice, a decision, a title. The path of one message through the
modules is told once, in ``docs/architecture.md``.

News reaches whoever waits for it by one road too: :meth:`Hub.listening` while
one waits (an agent's wait for its question's outcome), :meth:`Hub.tell` or
:meth:`Hub.tell_from_sync` when it happened, in whichever process. A listener
is woken, never handed the news: it reads what changed from the database.

The hub beats for its turns: the one liveness signal (``process.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils import timezone

from planner.agent.frames import Frame
from planner.ground import ending, process
from planner.ground.bridge import db
from planner.ground.process import HEARTBEAT_SECONDS, PROCESS_ID, stamped
from planner.ground.turns import LiveTurn
from planner.live.guard import Guard
from planner.live.inbox import Inbox
from planner.live.relay import link
from planner.models import Session, SessionState
from tracker.errors import UnavailableError

logger = logging.getLogger(__name__)


class Opening:
    """A session being opened here (:meth:`Hub.opening`): register the turn it opens."""

    def __init__(self, hub: Hub, session_id: uuid.UUID) -> None:
        self.hub = hub
        self.session_id = session_id
        self.live: LiveTurn | None = None

    async def turn(self, *, turn: int, user_id: int | None, inputs_waiting: bool) -> LiveTurn:
        """Register the turn the service opened: it runs here from now on."""
        live = LiveTurn(
            session_id=self.session_id,
            turn=turn,
            outbox=await self.hub.relay.outbox(self.session_id),
            user_id=user_id,
        )
        live.inputs_waiting = inputs_waiting
        self.hub.turns.start(live)
        self.live = live
        return live


class Watching:
    """One watcher's place among the session's (:meth:`Hub.watching`), for as long as the block
    runs: a class rather than a generator, since every open socket holds one."""

    __slots__ = ("hub", "inbox", "session_id")
    inbox: Inbox  # once entered

    def __init__(self, hub: Hub, session_id: uuid.UUID) -> None:
        self.hub = hub
        self.session_id = session_id

    async def __aenter__(self) -> tuple[Inbox, bool]:
        hub, session_id = self.hub, self.session_id
        await hub.relay.watch(session_id)
        # Joining and taking a local turn's frames so far happen at once, so they come first.
        live = hub.turns.get(session_id)
        self.inbox = Inbox(live.frames if live is not None else None)
        hub.watchers.setdefault(session_id, set()).add(self.inbox)
        return self.inbox, live is not None

    async def __aexit__(self, *exc_info: object) -> None:
        hub, session_id = self.hub, self.session_id
        watchers = hub.watchers[session_id]
        watchers.discard(self.inbox)
        if not watchers:
            del hub.watchers[session_id]
        await hub.relay.unwatch(session_id)


@dataclass(eq=False)
class Listener:
    """One wait for news of a topic: ``heard`` is set when it happened (or may have: the relay
    lost the other processes for a moment). ``deaf`` when the other processes could not be asked
    to tell it: only this process's news wakes it, and the waiter reads again now and then."""

    loop: asyncio.AbstractEventLoop
    heard: asyncio.Event = field(default_factory=asyncio.Event)
    deaf: bool = False

    def wake(self) -> None:
        self.loop.call_soon_threadsafe(self.heard.set)

    async def heard_within(self, seconds: float, *, deaf_every: float) -> bool:
        """Wait up to ``seconds`` for news, or only ``deaf_every`` when deaf (the waiter reads
        again then, for what this process could not hear); whether news came. It is taken: the
        next wait waits for more."""
        timeout = min(seconds, deaf_every) if self.deaf else seconds
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.heard.wait(), timeout=max(0.0, timeout))
        heard = self.heard.is_set()
        self.heard.clear()
        return heard


HAND_OVER_SECONDS = 5.0
LOST = "This server lost its link to the other servers for a moment; reconnect to catch up."


@transaction.atomic
def heartbeat(*, session_ids: list[uuid.UUID], owner: str) -> None:
    """One beat for every turn ``owner`` runs: a single statement however many there are.

    A session whose row a turn's save holds right now is skipped, not waited for: that save
    writes the heartbeat itself, and a multi-row update that waits on rows in no set order can
    deadlock with a save elsewhere (PostgreSQL; SQLite has one writer at a time)."""
    running = Session.objects.filter(pk__in=session_ids, turn_owner=owner, state=SessionState.RUNNING)
    unlocked = running.select_for_update(skip_locked=True).order_by("pk").values("pk")
    Session.objects.filter(pk__in=unlocked).update(heartbeat_at=timezone.now())


class Hub:
    def __init__(self) -> None:
        self.turns = process.turns
        self.histories = process.histories
        self.guard = Guard()
        self.relay = link(deliver=self._deliver, control=self._control, lost=self._lost, hear=self._hear)
        # Inboxes of this process's watchers, by session: every frame published here reaches them.
        self.watchers: dict[uuid.UUID, set[Inbox]] = {}
        # Who waits here for news, by topic: each an event on its own event loop.
        self.listeners: dict[str, set[Listener]] = {}
        # Whether a question or an answered turn waits here for a free turn (the runner's passes).
        self.work_waiting = False
        # Turns over whose task still does what follows them: starting what waited for a free
        # turn, proposing the session's title (the runner's ``wait`` and ``settle`` wait for it).
        self.ending: dict[uuid.UUID, asyncio.Task[None]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._thread: int | None = None

    # ------------------------------------------------------------------ lifespan

    async def start(self) -> None:
        """Run on this event loop: beat for the turns here and sweep the grants, until :meth:`stop`."""
        if self.loop is not None:
            raise RuntimeError("the hub already runs on an event loop")
        self.loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        context = contextvars.Context()  # the tasks outlive whatever request started the server
        self._tasks = [
            self.loop.create_task(self._beat(), context=context),
            self.loop.create_task(self.guard.run(), context=context),
        ]

    async def stop(self) -> None:
        """Stop beating, sweeping and relaying; turns still running here are the caller's to await."""
        tasks, self._tasks = self._tasks, []
        try:
            await ending.cancelled(tasks, "the hub's tasks")
            await ending.bounded(self.relay.close(), "the relay's close")
        finally:
            self.loop = self._thread = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Hub]:
        """The hub, started on this event loop for as long as the block runs."""
        await self.start()
        try:
            yield self
        finally:
            await self.stop()

    @property
    def started(self) -> bool:
        return self.loop is not None

    # ------------------------------------------------------------------ turns here

    @contextlib.asynccontextmanager
    async def opening(self, session_id: uuid.UUID) -> AsyncIterator[Opening]:
        """The one way a turn opens here: serve the session's control messages (so the turn is
        stoppable from every process; with the channel layer down this refuses, before anything
        is written) and claim the session here (so nobody takes a turn being opened for dead),
        for as long as the block calls the service that may open one; a turn the block registers
        (:meth:`Opening.turn`) stays served, anything else is let go."""
        await self.relay.serve(session_id)
        opening = Opening(self, session_id)
        self.turns.claim(session_id)
        try:
            yield opening
        finally:
            self.turns.release(session_id)
            if opening.live is None:
                await self.relay.unserve(session_id)

    async def closing(self, live: LiveTurn) -> None:
        """A turn of this process ended: stop serving it, close its outbox, let it go."""
        try:
            await self.relay.unserve(live.session_id)
            await live.outbox.close()
        finally:
            self.turns.end(live)

    def turn_here(self, session_id: uuid.UUID) -> LiveTurn | None:
        """The session's turn, if it runs in this process."""
        return self.turns.get(session_id)

    def runs_here(self, session_id: uuid.UUID) -> bool:
        return self.turns.runs(session_id)

    async def stop_elsewhere(self, session_id: uuid.UUID) -> None:
        """Ask the process running the session's turn to stop it (one that runs here stops
        with :meth:`stop_here`)."""
        await self.relay.stop(session_id)

    def stop_here(self, session_id: uuid.UUID) -> bool:
        return self.turns.stop(session_id)

    async def frames_elsewhere(self, session_id: uuid.UUID) -> list[Frame]:
        """The frames so far of the session's turn running in another process (``[]`` if none
        answers in time)."""
        return await self.relay.replay(session_id)

    # ------------------------------------------------------------------ publishing

    async def publish(self, session_id: uuid.UUID, batch: list[Frame]) -> None:
        """The one road of every frame to the session's watchers, here and in every process.

        A turn running here keeps its frames for watchers who arrive late and sends them on
        through its outbox, in order; anything else (a recovery, a decision, a title, a
        request answered) goes straight to the other processes. Failing to tell them is
        logged: a page that reconnects reads the transcript."""
        numbered = [stamped(frame) for frame in batch]
        live = self.turns.get(session_id)
        if live is not None:
            for frame in numbered:
                live.remember(frame)
                live.outbox.put(frame)
            self._deliver(session_id, numbered)
            return
        self._deliver(session_id, numbered)  # before any frame of a new turn, here
        try:
            await self.relay.publish(session_id, numbered)  # a watcher here drops the copy
        except Exception:
            logger.warning("could not tell other processes about session %s", session_id)

    def publish_from_sync(self, session_id: uuid.UUID, batch: list[Frame]) -> None:
        """:meth:`publish`, for synchronous code on another thread (an admin view deciding a
        changeset): the one way from sync code into the live side.

        The frames are handed to the hub's event loop, waiting for them to be handed over (a
        moment: no model call, no database), so that a page that reloads right after sees them.
        Without a running hub here nobody watches here, and only the other processes are told."""
        if self._thread == threading.get_ident():
            raise RuntimeError("publish_from_sync would block the hub's own event loop; await publish")
        try:
            if self.loop is not None and self.loop.is_running():
                handed = asyncio.run_coroutine_threadsafe(self.publish(session_id, batch), self.loop)
                handed.result(timeout=HAND_OVER_SECONDS)
            else:
                async_to_sync(self.relay.publish)(session_id, [stamped(frame) for frame in batch])
        except Exception:
            logger.warning("could not tell the watchers of session %s", session_id, exc_info=True)

    # ------------------------------------------------------------------ watching

    def watching(self, session_id: uuid.UUID) -> Watching:
        """An inbox of the session's frames, starting with the frames so far of its turn if one
        runs here, and whether one does; raises ``UnavailableError`` when the channel layer is
        down."""
        return Watching(self, session_id)

    # ------------------------------------------------------------------ news

    @contextlib.asynccontextmanager
    async def listening(self, topic: str) -> AsyncIterator[Listener]:
        """A wait for news of ``topic``, told here or in any process, for as long as the block runs.

        It listens before the block starts: what the waiter reads first in the block either
        misses nothing or is followed by the news. With the channel layer down it still hears
        this process (``deaf``) rather than refusing the wait."""
        listener = Listener(asyncio.get_running_loop())
        self.listeners.setdefault(topic, set()).add(listener)
        try:
            try:
                await self.relay.listen(topic)
            except UnavailableError:
                listener.deaf = True
            try:
                yield listener
            finally:
                if not listener.deaf:
                    await self.relay.unlisten(topic)
        finally:
            listeners = self.listeners[topic]
            listeners.discard(listener)
            if not listeners:
                del self.listeners[topic]

    async def tell(self, topic: str) -> None:
        """``topic`` happened: wake its listeners here and in every process."""
        self._hear(topic)
        await self._tell_others(topic)

    def tell_from_sync(self, topic: str) -> None:
        """:meth:`tell`, for synchronous code on any thread (a service's commit): it does not wait
        for the other processes to be told, unless no hub runs in this process (a worker)."""
        self._hear(topic)
        loop = self.loop
        if loop is not None and loop.is_running():
            asyncio.run_coroutine_threadsafe(self._tell_others(topic), loop)
            return
        try:
            async_to_sync(self.relay.tell)(topic)
        except Exception:
            logger.warning("could not tell other processes about %s", topic, exc_info=True)

    async def _tell_others(self, topic: str) -> None:
        try:
            await self.relay.tell(topic)
        except Exception:
            logger.warning("could not tell other processes about %s", topic, exc_info=True)

    def _hear(self, topic: str) -> None:
        """News of ``topic`` (from here or from the relay): wake its listeners here."""
        for listener in list(self.listeners.get(topic, ())):
            listener.wake()

    def _deliver(self, session_id: uuid.UUID, batch: list[Frame]) -> None:
        """Frames for this process's watchers of the session (from here or from the relay)."""
        for inbox in self.watchers.get(session_id, ()):
            inbox.put(batch)

    def _control(self, session_id: uuid.UUID, message: dict[str, Any]) -> Any:
        """A control message for a turn here: stop it, or replay its frames to another process."""
        command = message.get("command")
        if command == "stop":
            self.turns.stop(session_id)  # also a turn being started here: it starts stopped
            return None
        live = self.turns.get(session_id)
        if live is None:
            return None
        if command == "replay" and message.get("reply_to"):
            live.outbox.watched()  # publish from now on, without waiting for a check
            return self.relay.answer_replay(message, list(live.frames))
        return None

    def _lost(self) -> None:
        """The relay lost the channel layer: end every watch that relied on it (each page
        reconnects and reloads what it missed). Watchers of turns running here miss nothing.
        Every listener is woken to read again: news told meanwhile may not have reached it."""
        for listeners in list(self.listeners.values()):
            for listener in list(listeners):
                listener.wake()
        for session_id, inboxes in self.watchers.items():
            if self.turns.get(session_id) is None:
                for inbox in inboxes:
                    inbox.end(UnavailableError(LOST))

    # ------------------------------------------------------------------ the heartbeat

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            running = self.turns.sessions()
            if not running:
                continue
            try:
                await db(heartbeat)(session_ids=running, owner=PROCESS_ID)
            except Exception:
                logger.exception("the heartbeat of %d turns failed", len(running))


hub = Hub()
