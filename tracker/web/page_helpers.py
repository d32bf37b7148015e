"""What every server-rendered page of the tracker and the knowledge base shares: the signed-in user,
the project found through the one permission check (404 for a reader who cannot read it, 403 for one
who lacks the permission), and a strict Content-Security-Policy (no inline script or style).

The planner's and the knowledge base's pages use the same.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from functools import wraps

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse

from tracker.errors import NotFoundError, PermissionDeniedError
from tracker.models import Project
from tracker.selectors import project_get
from tracker.trust.permissions import TRACKER_READ, require

View = Callable[..., HttpResponse]


def content_security_policy(request: HttpRequest, *, sockets: bool = False) -> str:
    """Only this origin's scripts, styles (and, with ``sockets``, WebSockets); nothing inline,
    nothing framed."""
    host = request.get_host()
    connect = f"connect-src 'self' ws://{host} wss://{host}" if sockets else "connect-src 'self'"
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "font-src 'self'",
            connect,
            "form-action 'self'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ]
    )


def _csp(view: View, *, sockets: bool) -> View:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        response = view(request, *args, **kwargs)
        response["Content-Security-Policy"] = content_security_policy(request, sockets=sockets)
        return response

    return wrapped


def with_csp(view: View) -> View:
    """The page's answer carries a strict policy: model or user text can never run in it."""
    return _csp(view, sockets=False)


def with_socket_csp(view: View) -> View:
    """:func:`with_csp` for a page that also opens this host's WebSocket (the chat)."""
    return _csp(view, sockets=True)


def no_store(view: View) -> View:
    """Nothing of the answer is kept by a browser or a proxy: a key may be in it (``/keys/``, the
    members page's new agent)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        response = view(request, *args, **kwargs)
        response["Cache-Control"] = "no-store"
        return response

    return wrapped


def page_user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # login_required let only a signed-in user through
    return request.user


def page_project(user: User, key: str, permission: str = TRACKER_READ) -> Project:
    """The project if ``user`` holds ``permission``: 404 if they cannot read it, else 403."""
    try:
        project = project_get(key=key)
        require(user, project, permission)
    except NotFoundError as exc:
        raise Http404(exc.message) from exc
    except PermissionDeniedError as exc:
        raise PermissionDenied(exc.message) from exc
    return project


# The session's one-time values of forms whose answer shows a secret once (a new key, a new agent).
KEY_FORMS = "ballet_key_forms"
MAX_KEY_FORMS = 10


def form_issued(request: HttpRequest) -> str:
    """A new form's one-time value, kept in the session with the few last ones (several tabs)."""
    once = secrets.token_urlsafe(16)
    request.session[KEY_FORMS] = [*request.session.get(KEY_FORMS, [])[-(MAX_KEY_FORMS - 1) :], once]
    return once


def form_used(request: HttpRequest, once: str) -> bool:
    """Whether ``once`` was issued and not used yet; it is used now."""
    issued: list[str] = request.session.get(KEY_FORMS, [])
    if once not in issued:
        return False
    request.session[KEY_FORMS] = [value for value in issued if value != once]
    return True
