"""The waiting feed and the stream of events, served in front of Django (docs/events.md#the-feed).

``GET /api/v1/projects/{key}/events/?wait=S`` (S > 0) and ``GET …/events/stream/`` with an
``Authorization`` header of Ballet's schemes are answered here, as ``/mcp`` is
(``planner/mcp_server/app.py``), not by Django: its middleware runs its synchronous parts on a
thread for each request, kept as long as the response lasts, so each open stream held a thread
and each woken waiter went out through threads one after the other (docs/benchmarks.md#events).
Here a request holds no thread: it is admitted by one call on the database threads, then waits
on the event loop with the other waiters of its project (``planner/live/event_feed.py``).

It answers what the REST views (``event_apis.py``) answer, through the same code
(``event_query.py``): the key or token authenticated (``tracker/web/credentials.py``; 401),
the ``read`` scope of an API key (403), the project readable (404, 403), the request counted
(429), the query validated (400 naming the field), in REST's error shape and order. The Host
header is checked against ``ALLOWED_HOSTS`` as Django checks it, and the answers carry the
headers Django's security and clickjacking middleware add. Everything else goes to Django: a
request without such a header (a browser's session), one that does not wait, another method.
A client that leaves ends its wait at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.http import QueryDict
from django.http.request import split_domain_port, validate_host
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import NotFound
from starlette.types import Message, Receive, Scope, Send

from planner.ground.bridge import db
from planner.web.event_query import EventQuery, event_query, event_stream, query_nul_check, query_page
from tracker.errors import error_body
from tracker.models import Scope as KeyScope
from tracker.trust.permissions import access_scope
from tracker.web.api_errors import exception_handler
from tracker.web.credentials import (
    LEGACY_TOKEN_HEADERS,
    credential_authenticate,
    credential_of,
    scope_require,
)

logger = logging.getLogger(__name__)

FEED_PATH = re.compile(r"/api/v1/projects/(?P<key>[^/]+)/events/(?P<stream>stream/)?")
Headers = list[tuple[bytes, bytes]]
App = Callable[..., Awaitable[None]]


@dataclass(frozen=True)
class Answer:
    """A JSON answer: a refusal, or the page of a wait."""

    status: int
    body: dict[str, Any]
    headers: Headers = field(default_factory=list)


@dataclass(frozen=True)
class Admitted:
    query: EventQuery
    legacy: bool  # a legacy token: its answers say it is deprecated


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def waits_here(scope: Scope) -> tuple[str, bool, QueryDict] | None:
    """The project key, whether it streams and the query of a request this route serves; None
    for any other (Django serves it)."""
    if scope["type"] != "http" or scope.get("method") != "GET":
        return None
    matched = FEED_PATH.fullmatch(scope.get("path", ""))
    if matched is None or credential_of(_header(scope, b"authorization")) is None:
        return None
    if settings.SECURE_SSL_REDIRECT and not _secure(scope):
        return None  # Django redirects it to HTTPS
    params = QueryDict(bytes(scope.get("query_string", b"")).decode("utf-8", "replace"))
    stream = matched["stream"] is not None
    if not stream:
        wait = params.get("wait")
        try:
            if wait is None or float(wait) <= 0:
                return None  # answered at once: Django's view
        except ValueError:
            pass  # refused here as REST refuses it
    return matched["key"], stream, params


def _secure(scope: Scope) -> bool:
    """Whether the request came over HTTPS, as Django tells (``SECURE_PROXY_SSL_HEADER``)."""
    if scope.get("scheme") == "https":
        return True
    proxy = settings.SECURE_PROXY_SSL_HEADER
    if not proxy:
        return False
    name, value = proxy
    header = name.removeprefix("HTTP_").lower().replace("_", "-").encode()
    sent = _header(scope, header)
    return sent is not None and sent.split(",", 1)[0].strip() == value


def security_headers(scope: Scope) -> Headers:
    """What ``SecurityMiddleware`` and ``XFrameOptionsMiddleware`` add to an answer."""
    headers: Headers = []
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        headers.append((b"x-content-type-options", b"nosniff"))
    if settings.SECURE_HSTS_SECONDS and _secure(scope):
        hsts = f"max-age={settings.SECURE_HSTS_SECONDS}"
        hsts += "; includeSubDomains" if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS else ""
        hsts += "; preload" if settings.SECURE_HSTS_PRELOAD else ""
        headers.append((b"strict-transport-security", hsts.encode()))
    policy = settings.SECURE_REFERRER_POLICY
    if policy:
        value = policy if isinstance(policy, str) else ",".join(policy)
        headers.append((b"referrer-policy", value.encode()))
    if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
        headers.append((b"cross-origin-opener-policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY.encode()))
    headers.append((b"x-frame-options", getattr(settings, "X_FRAME_OPTIONS", "DENY").upper().encode()))
    return headers


def admit(
    authorization: str | None, path: str, key: str, params: QueryDict, last_event_id: str | None
) -> Admitted | Answer:
    """The caller's query, checked and read first as REST does it; or the refusal REST answers.
    On the database threads."""
    credential = credential_of(authorization)
    assert credential is not None, "routed here only with a credential"
    legacy = False
    try:
        with access_scope():
            user, auth = credential_authenticate(credential)
            legacy = isinstance(auth, Token)
            scope_require(auth, KeyScope.READ, f"GET {path}"[:300])
            if "\x00" in key:
                raise NotFound()
            query_nul_check(params)
            return Admitted(event_query(user, auth, key, params, last_event_id), legacy)
    except Exception as exc:  # REST's answer to it, in its shape
        return refusal(exc, legacy)


def refusal(exc: Exception, legacy: bool = False) -> Answer:
    response = exception_handler(exc, {})
    if response is None:
        logger.error("the events feed failed", exc_info=exc)
        return Answer(500, error_body("server_error", "The events could not be read; the error was logged."))
    headers = [(b"www-authenticate", b'Bearer realm="ballet"')] if response.status_code == 401 else []
    return Answer(response.status_code, dict(response.data), headers + (_legacy() if legacy else []))


def _legacy() -> Headers:
    return [(name.lower().encode(), value.encode()) for name, value in LEGACY_TOKEN_HEADERS.items()]


async def answer_json(send: Send, scope: Scope, answer: Answer) -> None:
    payload = json.dumps(answer.body).encode()
    head = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        *answer.headers,
        *security_headers(scope),
    ]
    await send({"type": "http.response.start", "status": answer.status, "headers": head})
    await send({"type": "http.response.body", "body": payload})


async def serve(scope: Scope, send: Send, key: str, stream: bool, params: QueryDict) -> None:
    """Admit the request, then wait for its page or stream its events."""
    last = _header(scope, b"last-event-id") if stream else None
    admitted = await db(admit)(
        _header(scope, b"authorization"), scope["path"], key, params, last and last[:20]
    )
    if isinstance(admitted, Answer):
        await answer_json(send, scope, admitted)
        return
    extra = _legacy() if admitted.legacy else []
    if not stream:
        try:
            page = await query_page(admitted.query)
        except Exception as exc:
            found = refusal(exc, admitted.legacy)
        else:
            found = Answer(200, {"events": page.events, "next": page.next}, extra)
        await answer_json(send, scope, found)
        return
    if admitted.query.first.error is not None:
        await answer_json(send, scope, refusal(admitted.query.first.error, admitted.legacy))
        return
    head = [
        (b"content-type", b"text/event-stream"),
        (b"cache-control", b"no-cache"),
        (b"x-accel-buffering", b"no"),  # nginx: send each event as it comes
        *extra,
        *security_headers(scope),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": head})
    chunks = event_stream(admitted.query)
    try:
        async for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    finally:
        await chunks.aclose()
    await send({"type": "http.response.body", "body": b""})


async def _until_gone(receive: Receive, serving: asyncio.Task[Any], gone: list[bool]) -> None:
    """End the request's task when its client leaves (a wait or a stream never reads its body)."""
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            gone.append(True)
            serving.cancel()
            return


class EventRoute:
    """The ASGI app of the waiting feed and the stream, in front of ``app`` (Django)."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        routed = waits_here(scope)
        if routed is None:
            await self.app(scope, receive, send)
            return
        domain, _ = split_domain_port(_header(scope, b"host") or "")
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
            answer = Answer(400, error_body("bad_host", "Invalid Host header."))
            await answer_json(send, scope, answer)
            return
        serving = asyncio.current_task()
        assert serving is not None
        gone: list[bool] = []
        watcher = asyncio.ensure_future(_until_gone(receive, serving, gone))
        try:
            await serve(scope, send, *routed)
        except asyncio.CancelledError:
            if not gone:
                raise
            serving.uncancel()  # the client left: nothing more to answer
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


def with_event_route(app: App) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """``app`` with the waiting feed and the stream served in front of it."""
    return EventRoute(app)
