"""Who opened a WebSocket: the user of the Django session cookie, read once at the handshake.

Channels' ``AuthMiddlewareStack`` keeps a lazy session in every connection's
scope and wraps every frame sent to save it if it changed. A planner socket
never writes the session, so this middleware reads it once, puts the user in
the scope and keeps nothing else: less memory per idle connection, less work
per frame.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from channels.auth import get_user
from django.conf import settings
from django.http.cookie import parse_cookie


class SessionUserMiddleware:
    """Sets ``scope["user"]`` (``AnonymousUser`` without a valid session) and ``scope["login_key"]``
    for a WebSocket."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.session_store = import_module(settings.SESSION_ENGINE).SessionStore

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        # (This frame lasts as long as the socket: what it holds, every idle socket holds.)
        login_key = _login_key(scope)
        user = await get_user({"session": self.session_store(login_key)})
        # The login's key, so that the socket closes when that login ends (planner/live/guard.py).
        # Into the scope daphne made for this one connection rather than a copy of it: every
        # frame from here to daphne holds its scope for as long as the socket is open, and
        # nothing upstream reads it again.
        scope["user"], scope["login_key"] = user, login_key
        return await self.inner(scope, receive, send)


def _login_key(scope: dict[str, Any]) -> str | None:
    """The Django session key of the request's cookie, if it has one."""
    for name, value in scope.get("headers", ()):
        if name == b"cookie":
            return parse_cookie(value.decode("latin1")).get(settings.SESSION_COOKIE_NAME)
    return None
