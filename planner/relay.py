"""How frames reach watchers: their inboxes, and one channel-layer channel per process.

A watcher reads its :class:`Inbox`. A turn running in this process puts its
frames straight into the inboxes of this process's watchers (the runner does
that). In production mode the :class:`Relay` links the process to the others:
it owns the process's single channel on the channel layer, joins the frames
group of every session watched here and the control group of every turn
running here, and one receive loop hands what arrives to the inboxes (frames),
to the runner (``stop`` and ``replay`` for its turns) or to the watcher waiting
for a replay. An idle watcher costs no channel-layer call, and a session
watched here many times is one group membership; memberships and the watcher
presence in Redis are refreshed by one task for the whole process.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import Callable
from typing import Any

from planner import events, presence
from planner.frames import Frame

logger = logging.getLogger(__name__)

REPLAY_WAIT_SECONDS = 2.0


class Inbox:
    """Frames waiting for one watcher. Lighter than an ``asyncio.Queue`` (an idle watcher holds
    one), and :meth:`take` hands over everything waiting at once."""

    __slots__ = ("_frames", "_waiter")

    def __init__(self, frames: list[Frame] | None = None) -> None:
        self._frames: list[Frame] = list(frames or ())
        self._waiter: asyncio.Future[None] | None = None

    def put(self, batch: list[Frame]) -> None:
        self._frames.extend(batch)
        self._wake()

    def put_first(self, batch: list[Frame]) -> None:
        """``batch`` before anything already waiting (a replay of what came earlier)."""
        self._frames[:0] = batch
        self._wake()

    async def take(self) -> list[Frame]:
        while not self._frames:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        batch, self._frames = self._frames, []
        return batch

    def _wake(self) -> None:
        if self._frames and self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


Deliver = Callable[[uuid.UUID, list[Frame]], None]
Control = Callable[[uuid.UUID, dict[str, Any]], Any]


class Relay:
    """This process's channel on the channel layer (production mode); see the module docstring.

    ``deliver(session_id, frames)`` hands frames published elsewhere to the local
    watchers; ``control(session_id, message)`` serves a control message for a
    local turn (it may be a coroutine function).
    """

    def __init__(self, *, deliver: Deliver, control: Control) -> None:
        self._deliver = deliver
        self._control = control
        self._loop: asyncio.AbstractEventLoop | None = None
        self._channel = ""
        self._starting: asyncio.Task[str] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._wanted: dict[str, int] = {}  # group -> how many here need it
        self._joined: set[str] = set()
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._watched: set[uuid.UUID] = set()
        self._replays: dict[str, asyncio.Future[list[Frame]]] = {}
        self._tokens = itertools.count(1)

    async def watch(self, session_id: uuid.UUID) -> None:
        """A watcher of ``session_id`` is here: receive the session's frames from now on."""
        await self._want(events.frames_group(session_id), +1, session_id=session_id)

    async def unwatch(self, session_id: uuid.UUID) -> None:
        await self._want(events.frames_group(session_id), -1, session_id=session_id)

    async def serve(self, session_id: uuid.UUID) -> None:
        """A turn of ``session_id`` runs here: receive its control messages."""
        await self._want(events.control_group(session_id), +1)

    async def unserve(self, session_id: uuid.UUID) -> None:
        await self._want(events.control_group(session_id), -1)

    async def replay(self, session_id: uuid.UUID) -> list[Frame]:
        """The frames so far of the session's turn, from the process running it (``[]`` when it
        does not answer within ``REPLAY_WAIT_SECONDS``: the turn ended, or its process is gone)."""
        channel = await self._ensure_started()
        token = f"{next(self._tokens)}"
        answer: asyncio.Future[list[Frame]] = asyncio.get_running_loop().create_future()
        self._replays[token] = answer
        try:
            await events.send_control(session_id, "replay", reply_to=channel, token=token)
            return await asyncio.wait_for(answer, REPLAY_WAIT_SECONDS)
        except TimeoutError:
            return []
        finally:
            self._replays.pop(token, None)

    async def answer_replay(self, message: dict[str, Any], frames: list[Frame]) -> None:
        """Answer a replay request (``message``, as received) with ``frames``."""
        reply = {"type": events.REPLAY, "token": message.get("token", ""), "frames": frames}
        await events.send_to(message["reply_to"], reply)

    async def _want(self, group: str, change: int, *, session_id: uuid.UUID | None = None) -> None:
        # Counted before anything may fail, so that a watch that fails and the unwatch that
        # follows it leave the count as it was.
        self._follow_loop()
        count = self._wanted.get(group, 0) + change
        if count > 0:
            self._wanted[group] = count
        else:
            self._wanted.pop(group, None)
        await self._ensure_started()
        # One join or leave at a time per group, each ending as wanted now; the lock lives
        # while someone holds or waits for it.
        lock, users = self._locks.get(group, (asyncio.Lock(), 0))
        self._locks[group] = (lock, users + 1)
        try:
            async with lock:
                await self._join_or_leave(group, session_id)
        finally:
            lock, users = self._locks[group]
            if users == 1:
                del self._locks[group]
            else:
                self._locks[group] = (lock, users - 1)

    async def _join_or_leave(self, group: str, session_id: uuid.UUID | None) -> None:
        wanted = group in self._wanted
        if wanted and group not in self._joined:
            await events.group_add(group, self._channel)
            self._joined.add(group)
            if session_id is not None:
                self._watched.add(session_id)
                await presence.watching(session_id)
        elif not wanted and group in self._joined:
            self._joined.discard(group)
            if session_id is not None:
                self._watched.discard(session_id)
                await presence.not_watching(session_id)
            await events.group_discard(group, self._channel)

    def _follow_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (tests): start over on it
            self._loop, self._channel, self._starting = loop, "", None
            self._wanted.clear()
            self._joined.clear()
            self._locks.clear()
            self._watched.clear()
            self._replays.clear()

    async def _ensure_started(self) -> str:
        self._follow_loop()
        if not self._channel:
            if self._starting is None:
                self._starting = asyncio.get_running_loop().create_task(self._start())
            starting = self._starting
            try:
                self._channel = await asyncio.shield(starting)
            except Exception:
                if self._starting is starting:
                    self._starting = None  # the next call tries again
                raise
        return self._channel

    async def _start(self) -> str:
        """The process's channel, and the tasks that read it and keep its memberships."""
        channel = await events.new_channel()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._receive(channel)), loop.create_task(self._refresh(channel))]
        return channel

    async def _receive(self, channel: str) -> None:
        while True:
            try:
                message = await events.receive(channel)
                await self._dispatch(message)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("the relay could not handle a channel-layer message")
                await asyncio.sleep(0.1)

    async def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == events.REPLAY:
            answer = self._replays.get(str(message.get("token", "")))
            if answer is not None and not answer.done():
                answer.set_result(list(message.get("frames", [])))
            return
        session_id = uuid.UUID(str(message.get("session", "")))
        if kind == events.FRAME:
            self._deliver(session_id, list(message.get("frames", [])))
        elif kind == events.CONTROL:
            result = self._control(session_id, message)
            if asyncio.iscoroutine(result):
                await result

    async def _refresh(self, channel: str) -> None:
        """Keep this process's group memberships and watcher presence from expiring."""
        while True:
            await asyncio.sleep(presence.WATCH_REFRESH_SECONDS)
            try:
                for group in list(self._joined):
                    await events.group_add(group, channel)
                await presence.watching(*self._watched)
            except Exception:
                logger.warning("could not refresh the relay's memberships; retrying", exc_info=True)
