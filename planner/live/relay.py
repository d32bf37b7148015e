"""How a process reaches the others: its one channel on the channel layer (production mode).

The :class:`Relay` owns the process's single channel, joins the frames group
of every session watched here and the control group of every turn running
here, and one receive loop hands what arrives to the runner: frames of turns
elsewhere (``deliver``), ``stop`` and ``replay`` for turns here (``control``),
news of a topic someone here waits for (``hear``: a question was settled in
another process), or the answer to a replay this process asked for. A session watched here many
times is one group membership; memberships and the watcher presence are
refreshed by one task for the whole process. A control membership outlives
its turn by ``SERVE_LINGER_SECONDS``: the session's next turn here, most often
its next message, finds it joined and spends no trip to Redis on it (the hub
answers control messages only for turns it runs, so one that lingers is heard
and ignored).

Redis can go away. A watch, a turn start or a stop that needs the channel
layer while it is down is refused with :class:`~tracker.errors.UnavailableError`
(503, close code 4503): nothing is accepted that could not be delivered. When
the relay finds the layer gone (its receive fails, or Redis forgot the
process's mark after a restart or a flush) it tells the runner (``lost``), which
ends the watches that depended on it so that their pages reload what they
missed, and rejoins every group as soon as Redis answers again.

In the embedded mode there is one process and nothing to link: the
:class:`LocalRelay` does nothing, at no cost, and the runner never asks which
mode it runs in.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from django.conf import settings

from planner.agent.frames import Frame
from planner.ground import ending
from planner.ground.turns import FramesOut
from planner.live import broadcast
from planner.live.broadcast import Broadcast
from planner.live.outbox import NoOutbox, Outbox
from planner.live.presence import Presence
from tracker.errors import UnavailableError

logger = logging.getLogger(__name__)

REPLAY_WAIT_SECONDS = 2.0
CHECK_SECONDS = 2.0  # how often the relay checks that Redis still has its mark
REFRESH_SECONDS = 20.0  # how often it renews its memberships (channel layer group_expiry: 120 s)
SERVE_LINGER_SECONDS = 30.0  # how long a turn's control membership stays for the session's next turn
RECONNECT_SECONDS = (0.1, 0.2, 0.5, 1.0)
# A watch, serve or stop that finds the relay joining the channel layer again waits this long for
# it before refusing: once Redis answers again, the rejoin takes a tenth of a second.
REJOIN_WAIT_SECONDS = 1.0
UNAVAILABLE = "Ballet's live channel (Redis) is unavailable right now; try again in a few seconds."

Deliver = Callable[[uuid.UUID, list[Frame]], None]
Control = Callable[[uuid.UUID, dict[str, Any]], Any]
Lost = Callable[[], None]
Hear = Callable[[str], None]


class Link(Protocol):
    """What the runner asks of a relay, in either mode."""

    @property
    def available(self) -> bool:
        """Whether it serves turns and watchers now (docs/operations.md: ``/healthz``)."""
        ...

    async def watch(self, session_id: uuid.UUID) -> None: ...

    async def unwatch(self, session_id: uuid.UUID) -> None: ...

    async def serve(self, session_id: uuid.UUID) -> None: ...

    async def unserve(self, session_id: uuid.UUID) -> None: ...

    async def replay(self, session_id: uuid.UUID) -> list[Frame]: ...

    async def answer_replay(self, message: dict[str, Any], frames: list[Frame]) -> None: ...

    async def stop(self, session_id: uuid.UUID) -> None: ...

    async def listen(self, topic: str) -> None: ...

    async def unlisten(self, topic: str) -> None: ...

    async def tell(self, topic: str) -> None: ...

    async def publish(self, session_id: uuid.UUID, batch: list[Frame]) -> None: ...

    async def outbox(self, session_id: uuid.UUID) -> FramesOut: ...

    async def close(self) -> None: ...


def link(*, deliver: Deliver, control: Control, lost: Lost, hear: Hear) -> Link:
    """This process's relay: over the channel layer in production, none in the embedded mode."""
    if settings.PRODUCTION_MODE:
        return Relay(deliver=deliver, control=control, lost=lost, hear=hear)
    return LocalRelay()


class LocalRelay:
    """The embedded mode's relay: every turn and watcher is in this process (the runner links them)."""

    available = True

    async def watch(self, session_id: uuid.UUID) -> None:
        pass

    async def unwatch(self, session_id: uuid.UUID) -> None:
        pass

    async def serve(self, session_id: uuid.UUID) -> None:
        pass

    async def unserve(self, session_id: uuid.UUID) -> None:
        pass

    async def replay(self, session_id: uuid.UUID) -> list[Frame]:
        return []

    async def answer_replay(self, message: dict[str, Any], frames: list[Frame]) -> None:
        pass

    async def stop(self, session_id: uuid.UUID) -> None:
        pass

    async def listen(self, topic: str) -> None:
        pass

    async def unlisten(self, topic: str) -> None:
        pass

    async def tell(self, topic: str) -> None:
        pass

    async def publish(self, session_id: uuid.UUID, batch: list[Frame]) -> None:
        pass

    async def outbox(self, session_id: uuid.UUID) -> FramesOut:
        return NoOutbox()

    async def close(self) -> None:
        pass


class Relay:
    """This process's channel on the channel layer; see the module docstring."""

    def __init__(self, *, deliver: Deliver, control: Control, lost: Lost, hear: Hear) -> None:
        self._deliver = deliver
        self._control = control
        self._lost = lost
        self._hear = hear
        self._broadcast = Broadcast()
        self._presence: Presence | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # where its channel and connections live
        self._channel = ""
        self._starting: asyncio.Task[str] | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._wanted: dict[str, int] = {}  # group -> how many here need it
        self._joined: set[str] = set()
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._lingering: dict[str, asyncio.TimerHandle] = {}  # served groups no turn needs for now
        self._leaving: set[asyncio.Task[None]] = set()
        self._watched: set[uuid.UUID] = set()
        self._replays: dict[str, asyncio.Future[list[Frame]]] = {}
        self._tokens = itertools.count(1)

    @property
    def available(self) -> bool:
        """False from the moment the relay finds the channel layer gone until it rejoined."""
        return self._reconnecting is None or self._reconnecting.done()

    async def watch(self, session_id: uuid.UUID) -> None:
        """A watcher of ``session_id`` is here: receive the session's frames from now on."""
        await self._want(broadcast.frames_group(session_id), +1, session_id=session_id)

    async def unwatch(self, session_id: uuid.UUID) -> None:
        await self._want(broadcast.frames_group(session_id), -1, session_id=session_id)

    async def serve(self, session_id: uuid.UUID) -> None:
        """A turn of ``session_id`` runs (or is starting) here: receive its control messages."""
        group = broadcast.control_group(session_id)
        lingering = self._lingering.pop(group, None)
        if lingering is not None:
            lingering.cancel()
            self._count(group, -1)  # the need the last turn left becomes this one's
        await self._want(group, +1)

    async def unserve(self, session_id: uuid.UUID) -> None:
        """The turn no longer needs the session's control messages: the last need of the group
        lingers ``SERVE_LINGER_SECONDS`` before the process leaves it."""
        group = broadcast.control_group(session_id)
        if self._wanted.get(group) == 1 and group in self._joined and group not in self._lingering:
            self._lingering[group] = asyncio.get_running_loop().call_later(
                SERVE_LINGER_SECONDS, self._stop_lingering, group
            )
            return
        await self._want(group, -1)

    def _stop_lingering(self, group: str) -> None:
        if self._lingering.pop(group, None) is not None:
            task = asyncio.get_running_loop().create_task(
                self._want(group, -1), context=contextvars.Context()
            )
            self._leaving.add(task)
            task.add_done_callback(self._leaving.discard)

    async def replay(self, session_id: uuid.UUID) -> list[Frame]:
        """The frames so far of the session's turn, from the process running it (``[]`` when it
        does not answer within ``REPLAY_WAIT_SECONDS``: the turn ended, or its process is gone)."""
        channel = await self._ensure_started()
        token = f"{next(self._tokens)}"
        answer: asyncio.Future[list[Frame]] = asyncio.get_running_loop().create_future()
        self._replays[token] = answer
        try:
            await _unavailable_if_failing(
                self._broadcast.send_control(session_id, "replay", reply_to=channel, token=token)
            )
            return await asyncio.wait_for(answer, REPLAY_WAIT_SECONDS)
        except TimeoutError:
            return []
        finally:
            self._replays.pop(token, None)

    async def answer_replay(self, message: dict[str, Any], frames: list[Frame]) -> None:
        """Answer a replay request (``message``, as received) with ``frames``."""
        reply = {"type": broadcast.REPLAY, "token": message.get("token", ""), "frames": frames}
        await self._broadcast.send_to(message["reply_to"], reply)

    async def stop(self, session_id: uuid.UUID) -> None:
        """Ask the process running the session's turn to stop it."""
        await self._refuse_while_unavailable()
        await _unavailable_if_failing(self._broadcast.send_control(session_id, "stop"))

    async def listen(self, topic: str) -> None:
        """Someone here waits for news of ``topic``: receive it from now on."""
        await self._want(broadcast.news_group(topic), +1)

    async def unlisten(self, topic: str) -> None:
        await self._want(broadcast.news_group(topic), -1)

    async def tell(self, topic: str) -> None:
        """Tell every process where someone waits for ``topic`` that it happened."""
        self._on_this_loop()
        await self._broadcast.send_news(topic)

    async def publish(self, session_id: uuid.UUID, batch: list[Frame]) -> None:
        """Send ``batch`` to the session's watchers in every process (a notice, not a turn's frames)."""
        self._on_this_loop()
        await self._broadcast.publish(session_id, batch)

    async def outbox(self, session_id: uuid.UUID) -> FramesOut:
        assert self._presence is not None  # the turn's session is served: the relay started
        return await Outbox.open(session_id, self._presence, self._broadcast)

    async def close(self) -> None:
        """Stop receiving and keeping memberships, and forget them (the hub stops)."""
        if self._loop is asyncio.get_running_loop():
            tasks = [*self._tasks, *(t for t in (self._starting, self._reconnecting) if t is not None)]
            await ending.ended(list(self._leaving), "the relay's groups being left")
            await ending.cancelled(tasks, "the relay's tasks")
            await ending.bounded(self._broadcast.close(), "the relay's channel layer")
            if self._presence is not None:
                await ending.bounded(self._presence.close(), "the relay's Redis connections")
        self._forget()

    def _forget(self) -> None:
        """Start over: no channel, no connections, no memberships (those of a loop that ended
        expire with the channel layer's ``group_expiry``)."""
        self._loop, self._presence, self._channel, self._starting, self._reconnecting = (
            None,
            None,
            "",
            None,
            None,
        )
        self._tasks = []
        self._broadcast = Broadcast()
        for lingering in self._lingering.values():
            lingering.cancel()
        self._lingering.clear()
        self._wanted.clear()
        self._joined.clear()
        self._locks.clear()
        self._watched.clear()
        self._replays.clear()

    def _on_this_loop(self) -> None:
        """The relay's channel, tasks and connections belong to the event loop they were opened
        on: the hub's, for as long as it runs. Code that runs on a loop of its own without the hub
        (a test's synchronous client, a management command) gets a relay of that loop."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._forget()
            self._loop = loop

    async def _want(self, group: str, change: int, *, session_id: uuid.UUID | None = None) -> None:
        """Count one more (or one less) need of ``group`` here, and join (or leave) it to match.

        A watch or serve that cannot reach the channel layer raises
        ``UnavailableError`` and leaves nothing to undo; leaving never fails (a
        membership left behind expires with the layer's ``group_expiry``)."""
        if change > 0:
            await self._refuse_while_unavailable()
        self._count(group, change)
        try:
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
        except Exception as exc:
            if change > 0:
                self._count(group, -change)
                raise UnavailableError(UNAVAILABLE) from exc
            logger.info("could not leave %s; its membership will expire", group)

    def _count(self, group: str, change: int) -> None:
        count = self._wanted.get(group, 0) + change
        if count > 0:
            self._wanted[group] = count
        else:
            self._wanted.pop(group, None)

    async def _join_or_leave(self, group: str, session_id: uuid.UUID | None) -> None:
        wanted = group in self._wanted
        if wanted and group not in self._joined:
            await self._broadcast.group_add(group, self._channel)
            self._joined.add(group)
            if session_id is not None:
                self._watched.add(session_id)
                await self._presence_started().watching(session_id)
        elif not wanted and group in self._joined:
            self._joined.discard(group)
            if session_id is not None:
                self._watched.discard(session_id)
                await self._presence_started().not_watching(session_id)
            await self._broadcast.group_discard(group, self._channel)

    async def _refuse_while_unavailable(self) -> None:
        self._on_this_loop()
        if self._reconnecting is not None and not self.available:
            await asyncio.wait({self._reconnecting}, timeout=REJOIN_WAIT_SECONDS)
        if not self.available:
            raise UnavailableError(UNAVAILABLE)

    def _presence_started(self) -> Presence:
        assert self._presence is not None  # set by _start, before any membership
        return self._presence

    async def _ensure_started(self) -> str:
        self._on_this_loop()
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
        if self._presence is None:
            self._presence = Presence(settings.SERVER.redis_url or "")
        channel = await self._broadcast.new_channel()
        await self._presence.mark()
        loop = asyncio.get_running_loop()
        context = contextvars.Context()
        self._tasks = [
            loop.create_task(self._receive(channel), context=context),
            loop.create_task(self._keep(channel), context=context),
        ]
        return channel

    async def _receive(self, channel: str) -> None:
        while True:
            try:
                message = await self._broadcast.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("the relay lost the channel layer", exc_info=True)
                await self._reconnect(channel)
                continue
            try:
                await self._dispatch(message)
            except Exception:
                logger.exception("the relay could not handle a channel-layer message")

    async def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == broadcast.REPLAY:
            answer = self._replays.get(str(message.get("token", "")))
            if answer is not None and not answer.done():
                answer.set_result(list(message.get("frames", [])))
            return
        if kind == broadcast.NEWS:
            self._hear(str(message.get("topic", "")))
            return
        session_id = uuid.UUID(str(message.get("session", "")))
        if kind == broadcast.FRAME:
            self._deliver(session_id, list(message.get("frames", [])))
        elif kind == broadcast.CONTROL:
            result = self._control(session_id, message)
            if asyncio.iscoroutine(result):
                await result

    async def _keep(self, channel: str) -> None:
        """Check every ``CHECK_SECONDS`` that Redis still knows this process; renew the
        memberships and watcher presence every ``REFRESH_SECONDS``."""
        since_refresh = 0.0
        while True:
            await asyncio.sleep(CHECK_SECONDS)
            since_refresh += CHECK_SECONDS
            try:
                if not await self._presence_started().marked():
                    logger.warning("Redis forgot this process (restarted or flushed)")
                    await self._reconnect(channel)
                    continue
                if since_refresh >= REFRESH_SECONDS:
                    since_refresh = 0.0
                    await self._rejoin(channel)
            except Exception:
                logger.warning("the relay cannot reach the channel layer", exc_info=True)
                await self._reconnect(channel)

    async def _reconnect(self, channel: str) -> None:
        """The layer was lost: end the watches that relied on it, then rejoin as soon as it answers.
        The receive loop and the keeper may both find the loss; they share one reconnection."""
        if self._reconnecting is None or self._reconnecting.done():
            self._reconnecting = asyncio.get_running_loop().create_task(
                self._rejoin_when_back(channel), context=contextvars.Context()
            )
            self._lost()
        await asyncio.shield(self._reconnecting)

    async def _rejoin_when_back(self, channel: str) -> None:
        for attempt in itertools.count():
            await asyncio.sleep(RECONNECT_SECONDS[min(attempt, len(RECONNECT_SECONDS) - 1)])
            try:
                await self._rejoin(channel)
            except Exception as exc:
                logger.debug("the channel layer is still unreachable: %s", exc)
                continue
            logger.info("the relay is back on the channel layer after %d attempts", attempt + 1)
            return

    async def _rejoin(self, channel: str) -> None:
        """Join every group this process needs again, and say again who watches what."""
        presence = self._presence_started()
        await presence.mark()
        for group in list(self._joined):
            await self._broadcast.group_add(group, channel)
        await presence.watching(*self._watched)


async def _unavailable_if_failing(call: Any) -> None:
    try:
        await call
    except Exception as exc:
        raise UnavailableError(UNAVAILABLE) from exc
