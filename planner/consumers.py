"""The WebSocket of a planner session: thin. Authenticate, parse a frame, call the runner, send.

``/ws/planner/sessions/{session}/``, authenticated by the Django session
cookie (origin checked against the allowed hosts in ``ballet/asgi.py``).
Close codes: 4401 not logged in, 4404 unknown session or no access, 4403
lacks ``planner.chat``. A bad frame gets an ``error`` frame; the connection
stays open. Turns started here belong to the runner: a disconnect ends only
the watching.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.contrib.auth.models import User

from planner import frames
from planner.runner import runner
from planner.selectors import session_get
from planner.services import MAX_MESSAGE_CHARS
from tracker.errors import BalletError, NotFoundError
from tracker.permissions import PLANNER_CHAT, has_permission

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
MAX_FRAME_BYTES = 4 * MAX_MESSAGE_CHARS + 1024


@database_sync_to_async
def _may_chat(user: User, session_id: str) -> int | None:
    """None when ``user`` may chat in the session, else the close code saying why not."""
    try:
        session = session_get(user=user, session_id=session_id)
    except NotFoundError:
        return CLOSE_NOT_FOUND
    return None if has_permission(user, session.project_id, PLANNER_CHAT) else CLOSE_FORBIDDEN


class PlannerSessionConsumer(AsyncWebsocketConsumer):
    # No channel of its own: frames come through the runner's watch. An unconfigured alias
    # spares every idle connection a channel-layer queue and receive.
    channel_layer_alias = "planner-consumers-use-the-runner"
    session_id: uuid.UUID
    user: User
    watcher: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        refusal = await _may_chat(user, self.scope["url_route"]["kwargs"]["session"])
        if refusal is not None:
            await self.close(code=refusal)
            return
        self.user = user
        self.session_id = uuid.UUID(self.scope["url_route"]["kwargs"]["session"])
        self.watcher = asyncio.ensure_future(self._forward())

    async def _forward(self) -> None:
        try:
            async for frame in runner.watch(session_id=self.session_id, user=self.user):
                await self.send(text_data=json.dumps({k: v for k, v in frame.items() if k != "origin"}))
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("watching session %s failed", self.session_id)
            await self.close(code=1011)

    async def disconnect(self, code: int) -> None:
        if self.watcher is not None:
            self.watcher.cancel()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.watcher is None:
            return  # refused connections are closing
        frame, problem = _parse(text_data)
        if problem is not None:
            await self._error(*problem)
            return
        try:
            if frame["type"] == "message":
                await runner.send(session_id=self.session_id, user=self.user, text=frame["text"])
            else:
                await runner.stop(session_id=self.session_id, user=self.user)
        except BalletError as exc:
            await self._error(exc.code, exc.message)

    async def _error(self, code: str, message: str) -> None:
        await self.send(text_data=json.dumps(frames.error(code=code, message=message)))


def _parse(text_data: str | None) -> tuple[dict[str, Any], tuple[str, str] | None]:
    """The client frame, or the (code, message) of what is wrong with it."""
    if text_data is None:
        return {}, ("invalid_frame", "Frames are JSON text.")
    if len(text_data) > MAX_FRAME_BYTES:
        return {}, ("too_large", f"A frame is at most {MAX_FRAME_BYTES} characters.")
    try:
        frame = json.loads(text_data)
    except ValueError:
        return {}, ("invalid_json", "The frame is not valid JSON.")
    if not isinstance(frame, dict) or frame.get("type") not in ("message", "stop"):
        return {}, ("unknown_type", 'A frame is {"type": "message", "text": ...} or {"type": "stop"}.')
    problem = _text_problem(frame.get("text")) if frame["type"] == "message" else None
    return (frame, None) if problem is None else ({}, problem)


def _text_problem(text: Any) -> tuple[str, str] | None:
    if not isinstance(text, str) or not text.strip():
        return ("invalid", "A message frame needs a non-empty text.")
    if len(text) > MAX_MESSAGE_CHARS:
        return ("too_large", f"A message is at most {MAX_MESSAGE_CHARS} characters.")
    return None
