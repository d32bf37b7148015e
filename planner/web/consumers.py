"""The WebSocket of a planner session: thin. Authenticate, parse a frame, call the runner, send.

``/ws/planner/sessions/{session}/``, authenticated by the Django session
cookie (origin checked against the allowed hosts in ``ballet/asgi.py``).
Close codes: 4401 not logged in, 4404 unknown session or no access, 4403
lacks ``planner.chat`` — at connect, and whenever the user loses access
later (``planner/live/guard.py``: within seconds, and at once when a frame is refused for
it) — and 4429 for a connection that keeps sending
too many frames. 4503 says the live channel (Redis) is unavailable, or
this server lost it for a moment, and 4500 that watching failed otherwise:
the page reloads the transcript and reconnects. A bad frame gets an ``error``
frame; the connection stays open. Client frames: ``message``, ``stop``, ``answer``,
``retract`` (take back the last steering message the planner has not read yet), ``retry`` (run
a failed or stopped last turn again) and ``edit`` (replace the last message nothing answered). Turns
started here belong to the runner: a disconnect ends only the watching.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib.auth.models import User

from planner.agent import frames
from planner.domain.selectors import session_project_seen
from planner.domain.services.human_requests import Resolution
from planner.domain.services.sessions import MAX_MESSAGE_CHARS, message_text_problem
from planner.ground.bridge import db
from planner.live import guard
from planner.live.hub import hub
from planner.live.runner import runner
from tracker.errors import (
    BalletError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    UnavailableError,
)

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = guard.NOT_LOGGED_IN
CLOSE_FORBIDDEN = guard.FORBIDDEN
CLOSE_NOT_FOUND = guard.NOT_FOUND
CLOSE_TOO_MANY_FRAMES = 4429
CLOSE_UNAVAILABLE = 4503
CLOSE_FAILED = 4500  # (daphne sends only 1000 and 3000-4999: 1011 would never reach the page)
MAX_FRAME_BYTES = 4 * MAX_MESSAGE_CHARS + 1024

Verdict = Literal["accept", "refuse", "drop", "close"]


@dataclass(slots=True)
class FrameMeter:
    """At most ``per_second`` frames a second from one connection (docs/trust.md#limits).

    A frame past the limit is refused without any work (the first of each second with an
    ``error`` frame, the rest silently, so a flood is not answered by a flood); a connection
    that keeps exceeding the limit for ``grace_seconds`` in a row is closed.
    """

    per_second: int
    grace_seconds: int
    _second: int = -1
    _count: int = 0
    _over_since: int | None = None
    _last_over: int = -2

    def take(self, now: float) -> Verdict:
        second = int(now)
        if second != self._second:
            self._second, self._count = second, 0
            if self._last_over < second - 1:  # the previous second kept to the limit
                self._over_since = None
        self._count += 1
        if self._count <= self.per_second:
            return "accept"
        first = self._last_over != second
        self._last_over = second
        if self._over_since is None:
            self._over_since = second
        if second - self._over_since >= self.grace_seconds:
            return "close"
        return "refuse" if first else "drop"


@db
def _may_chat(user: User, session_id: str) -> tuple[int | None, int]:
    """(None or the close code saying why ``user`` may not chat in the session, its project id)."""
    project_id = session_project_seen(user=user, session_id=session_id)
    if project_id is None:
        return CLOSE_NOT_FOUND, 0
    return guard.chat_refusal(user, project_id), project_id


class PlannerSessionConsumer(AsyncWebsocketConsumer):
    # No channel of its own: frames come through the runner's watch (the hub's inboxes), which
    # spares every idle connection a channel-layer queue and receive (see __call__).
    channel_layer = None
    groups = ()  # (none to join: the class's, rather than an empty list of every connection's own)
    session_id: uuid.UUID
    user: User
    grant: guard.Grant | None = None
    meter: FrameMeter | None = None  # made at the first frame the client sends: most never send one
    watcher: asyncio.Task[None] | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Dispatch daphne's messages one after the other, as channels' consumer does, but awaiting
        ``receive`` in this task: channels' dispatch awaits it in a task of its own, and a
        channel layer's receive besides, which would cost every idle connection a second task."""
        self.scope = scope
        self.base_send = send
        try:
            while True:
                await self.dispatch(await receive())
        except StopConsumer:
            pass

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        refusal, project_id = await _may_chat(user, self.scope["url_route"]["kwargs"]["session"])
        if refusal is not None:
            await self.close(code=refusal)
            return
        self.user = user
        self.session_id = uuid.UUID(self.scope["url_route"]["kwargs"]["session"])
        # The login the cookie carried (ws_auth.py); a socket authenticated otherwise has none.
        self.grant = guard.Grant(user.pk, project_id, self.scope.get("login_key"), self._revoke)
        hub.guard.hold(self.grant)
        self.watcher = asyncio.ensure_future(self._forward())

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch without its ``aclose_old_connections()`` before every frame: a hop
        to the thread-sensitive executor, which Django's requests share, at the start of every
        turn. This consumer's database work runs on the runner's threads, which check their own
        connections (planner/ground/bridge.py); the handshake's user is read by channels'
        ``database_sync_to_async``, which closes old connections around it."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def _revoke(self, code: int) -> None:
        """The user lost access (logged out, removed, demoted, deactivated): close."""
        self._end_watch()
        await self.close(code=code)

    async def _forward(self) -> None:
        try:
            async for frame in runner.watch(session_id=self.session_id, user=self.user):
                await self.send(text_data=frames.wire(frame))
        except asyncio.CancelledError:
            raise
        except UnavailableError:
            await self._watch_ended(CLOSE_UNAVAILABLE)
        except Exception:
            logger.exception("watching session %s failed", self.session_id)
            await self._watch_ended(CLOSE_FAILED)

    async def _watch_ended(self, code: int) -> None:
        """The watch ended by itself: close, so that the page reconnects and reloads."""
        self.watcher = None  # this very task: nothing to cancel
        if self.grant is not None:
            hub.guard.release(self.grant)
        await self.close(code=code)

    def _end_watch(self) -> None:
        if self.grant is not None:
            hub.guard.release(self.grant)
        if self.watcher is not None:
            self.watcher.cancel()
            self.watcher = None

    async def disconnect(self, code: int) -> None:
        self._end_watch()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.watcher is None or self.grant is None:
            return  # refused or revoked connections are closing
        if self.meter is None:
            limits = settings.BALLET_LIMITS
            self.meter = FrameMeter(limits.frames_per_second, limits.frames_excess_seconds)
        verdict = self.meter.take(time.monotonic())
        if verdict != "accept":
            await self._over_limit(verdict)
            return
        frame, problem = _parse(text_data)
        if problem is not None:
            await self._error(*problem)
            return
        # The runner reads the user's access as it is now (not as it was when the socket opened)
        # and refuses a frame of someone who lost it; the socket then closes saying why.
        try:
            await self._act(frame)
        except (NotFoundError, PermissionDeniedError) as exc:
            refusal = await hub.guard.check(self.grant)
            if refusal is not None:
                await self._revoke(refusal)
            else:
                await self._error(exc.code, exc.message)
        except BalletError as exc:
            await self._error(exc.code, exc.message)

    async def _act(self, frame: dict[str, Any]) -> None:
        await INCOMING[frame["type"]].act(self, frame)

    async def answered(self, resolution: Resolution) -> None:
        if resolution.waiting is not None:  # accepted, yet the turn waits for a free one: say why
            await self._error(RateLimitedError.code, resolution.waiting)

    async def _over_limit(self, verdict: Verdict) -> None:
        if verdict == "close":
            self._end_watch()
            await self.close(code=CLOSE_TOO_MANY_FRAMES)
        elif verdict == "refuse":
            assert self.meter is not None  # (it measured this frame)
            limit = self.meter.per_second
            await self._error("rate_limited", f"At most {limit} frames a second; this one was ignored.")

    async def _error(self, code: str, message: str) -> None:
        await self.send(text_data=frames.wire(frames.error(code=code, message=message)))


def _parse(text_data: str | None) -> tuple[dict[str, Any], tuple[str, str] | None]:
    """The client frame, or the (code, message) of what is wrong with it."""
    if text_data is None:
        return {}, ("invalid_frame", "Frames are JSON text.")
    if len(text_data) > MAX_FRAME_BYTES:
        return {}, ("too_large", f"A frame is at most {MAX_FRAME_BYTES} characters.")
    try:
        frame = json.loads(text_data)
    except (ValueError, RecursionError):  # nested too deeply is not valid JSON either
        return {}, ("invalid_json", "The frame is not valid JSON (or is nested too deeply).")
    if not isinstance(frame, dict) or frame.get("type") not in INCOMING:
        return {}, (
            "unknown_type",
            'A frame is {"type": "message", "text": ...}, {"type": "stop"}, {"type": "retract"}, '
            '{"type": "retry"}, {"type": "edit", "seq": ..., "text": ...} or '
            '{"type": "answer", "request": ..., "text" or "approve": ...}.',
        )
    problem = INCOMING[frame["type"]].problem(frame)
    return (frame, None) if problem is None else ({}, problem)


def _bare_problem(frame: dict[str, Any]) -> tuple[str, str] | None:
    """A retract frame names nothing: it takes back the sender's last queued message, whichever;
    a retry frame neither: it runs the session's last turn again."""
    unknown = sorted(set(frame) - {"type"})
    if not unknown:
        return None
    if frame["type"] == "retract":
        return (
            "invalid",
            f"A retract frame has no field {unknown[0]!r}: it takes back your last queued message.",
        )
    return ("invalid", f"A retry frame has no field {unknown[0]!r}: it runs the chat's last turn again.")


def _edit_problem(frame: dict[str, Any]) -> tuple[str, str] | None:
    unknown = sorted(set(frame) - {"type", "seq", "text"})
    if unknown:
        return ("invalid", f"An edit frame has no field {unknown[0]!r}.")
    seq = frame.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        return ("invalid", "An edit frame names the message it edits: its seq, a positive integer.")
    return _text_problem(frame.get("text"))


def _reply_problem(frame: dict[str, Any]) -> tuple[str, str] | None:
    unknown = sorted(set(frame) - {"type", "request", "text", "approve", "reason"})
    if unknown:
        return ("invalid", f"An answer frame has no field {unknown[0]!r}.")
    if not isinstance(frame.get("request"), str):
        return ("invalid", "An answer frame names its request: its id, a string.")
    if ("text" in frame) == ("approve" in frame):
        return ("invalid", "An answer frame has a text (a question) or approve (an approval).")
    if "text" in frame:
        return _text_problem(frame["text"])
    return None


_text_problem = message_text_problem


def _message_problem(frame: dict[str, Any]) -> tuple[str, str] | None:
    return _text_problem(frame.get("text"))


def _no_problem(frame: dict[str, Any]) -> tuple[str, str] | None:
    """A stop frame is read by its type alone."""
    return None


# -- what each frame does: the runner's call, as the socket's user, in the socket's session

Consumer = PlannerSessionConsumer


async def _message(consumer: Consumer, frame: dict[str, Any]) -> None:
    await runner.send(session_id=consumer.session_id, user=consumer.user, text=frame["text"])


async def _stop(consumer: Consumer, frame: dict[str, Any]) -> None:
    await runner.stop(session_id=consumer.session_id, user=consumer.user)


async def _retract(consumer: Consumer, frame: dict[str, Any]) -> None:
    await runner.retract(session_id=consumer.session_id, user=consumer.user)


async def _retry(consumer: Consumer, frame: dict[str, Any]) -> None:
    await runner.retry(session_id=consumer.session_id, user=consumer.user)


async def _edit(consumer: Consumer, frame: dict[str, Any]) -> None:
    await runner.edit(
        session_id=consumer.session_id, user=consumer.user, seq=frame["seq"], text=frame["text"]
    )


async def _reply(consumer: Consumer, frame: dict[str, Any]) -> None:
    resolution = await runner.reply(
        session_id=consumer.session_id,
        user=consumer.user,
        request=frame.get("request"),
        text=frame.get("text"),
        approve=frame.get("approve"),
        reason=frame.get("reason"),
    )
    await consumer.answered(resolution)


@dataclass(frozen=True)
class Incoming:
    """One type of client frame (docs/protocol.md): what is wrong with one, if anything, and
    what it does once it is right."""

    problem: Callable[[dict[str, Any]], tuple[str, str] | None]
    act: Callable[[Consumer, dict[str, Any]], Awaitable[None]]


# Every frame a client may send, by type: the one place a new one is added.
INCOMING: dict[str, Incoming] = {
    "message": Incoming(_message_problem, _message),
    "stop": Incoming(_no_problem, _stop),
    "retract": Incoming(_bare_problem, _retract),
    "retry": Incoming(_bare_problem, _retry),
    "edit": Incoming(_edit_problem, _edit),
    "answer": Incoming(_reply_problem, _reply),
}
