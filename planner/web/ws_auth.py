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
        cookies = {}
        for name, value in scope.get("headers", ()):
            if name == b"cookie":
                cookies = parse_cookie(value.decode("latin1"))
                break
        login_key = cookies.get(settings.SESSION_COOKIE_NAME)
        user = await get_user({"session": self.session_store(login_key)})
        # The login's key, so that the socket closes when that login ends (planner/live/guard.py).
        return await self.inner({**scope, "user": user, "login_key": login_key}, receive, send)
