"""The failed-login limit of docs/trust.md#limits, on django-axes.

At most ``BALLET_LIMITS.login_failures`` failed logins per username and, apart,
per client IP within ``login_window_seconds``; past that every login of that
username or from that IP is refused, the right password too, until the window
since the last counted failure has passed. A successful login resets nothing:
an attacker who logs into their own account between guesses must not clear the
IP's count (the failures simply age out of the window). Axes records the
failures in its ``AccessAttempt`` table (the staff can see and delete them in
the admin) and counts them per username and per IP with separate queries.

The client IP is ``REMOTE_ADDR`` only. Behind a reverse proxy, run daphne with
``--proxy-headers`` so that it is the client's address; a header the client
sends itself is never trusted here.
"""

from __future__ import annotations

import math
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.db.models import Max, Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from rest_framework.request import Request

from tracker.errors import RateLimitedError, error_body
from tracker.models import Agent


class LoginLimitBackend(AxesStandaloneBackend):
    """Refuses a locked-out username or IP before any password is checked.

    An ``authenticate`` call without a request (a management command, the test
    client's ``login``) has no client to limit and passes through to the next
    backend; every login form and the token endpoint pass their request.
    """

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)


class HumanBackend(ModelBackend):
    """Django's password backend, for people only: an agent (``tracker.models.Agent``) acts through
    its API keys and never signs in, nor keeps a session it was somehow given (``get_user`` asks
    the same on every request, the WebSocket's too), nor gets a legacy token."""

    def user_can_authenticate(self, user: Any) -> bool:
        if not super().user_can_authenticate(user):
            return False
        pk = getattr(user, "pk", None)
        return pk is None or not Agent.objects.filter(user_id=pk).exists()

    def get_user(self, user_id: Any) -> Any:
        """The session's user, unless an agent: in the one query every request already makes."""
        user = User.objects.filter(pk=user_id, agent__isnull=True).first()
        return user if user is not None and ModelBackend.user_can_authenticate(self, user) else None


def client_ip(request: HttpRequest | Request) -> str | None:
    """The address daphne saw the request come from (see the module docstring for proxies)."""
    address = request.META.get("REMOTE_ADDR")
    return str(address) if address else None


def _minutes_left(request: HttpRequest | Request) -> int:
    """Minutes until the newest counted failure of this username or IP leaves the window."""
    window = settings.AXES_COOLOFF_TIME
    credentials = getattr(request, "axes_credentials", None) or {}
    username = credentials.get("username") if isinstance(credentials, dict) else None
    match = Q(ip_address=client_ip(request))
    if username:
        match |= Q(username=username)
    newest = AccessAttempt.objects.filter(match).aggregate(newest=Max("attempt_time"))["newest"]
    if newest is None:
        return math.ceil(window.total_seconds() / 60)
    seconds = (newest + window - timezone.now()).total_seconds()
    return max(1, math.ceil(seconds / 60))


def lockout_message(request: HttpRequest | Request) -> str:
    minutes = _minutes_left(request)
    unit = "minute" if minutes == 1 else "minutes"
    return f"Too many failed logins; try again in {minutes} {unit}."


def lockout_response(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
    """Axes's lockout answer: a readable page, or the API's JSON error for ``/api/``.

    Axes calls it as ``(request, response, credentials)`` or, from its async
    middleware, ``(request, credentials)``; only the request is used.
    """
    message = lockout_message(request)
    if request.path.startswith("/api/"):
        return JsonResponse(error_body(RateLimitedError.code, message), status=RateLimitedError.status)
    context = {"message": message, "login_url": settings.LOGIN_URL}
    return render(request, "registration/locked_out.html", context, status=RateLimitedError.status)
