"""``/inbox/``: what waits for the signed-in user across their projects, each entry linked and
dismissable by a plain form (no script needed). The selectors decide what is shown
(``planner/domain/inbox.py``); this only renders it and hands a dismissal to its service.
``/inbox/stream/`` sends the header's count as Server-Sent Events each time it may have changed
(``planner/live/inbox_waits.py``), holding no thread while it waits."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from planner.domain.inbox import MAX_ENTRIES, inbox_count, inbox_entries
from planner.domain.services.inbox import inbox_dismiss
from planner.ground.bridge import db
from planner.live.inbox_waits import inbox_follow
from tracker.errors import NotFoundError
from tracker.web.page_helpers import page_user, with_csp


@require_GET
@login_required
@with_csp
def inbox(request: HttpRequest) -> HttpResponse:
    user = page_user(request)
    entries = inbox_entries(user=user)
    total = len(entries) if len(entries) < MAX_ENTRIES else inbox_count(user=user)
    context = {"entries": entries, "total": total, "more": total > len(entries)}
    response = render(request, "planner/inbox.html", context)
    response["Cache-Control"] = "private, no-store"
    return response


@require_POST
@login_required
def inbox_dismiss_page(request: HttpRequest, entry: str) -> HttpResponse:
    """Put an entry away and go back to the inbox; an entry that is not the user's is a 404."""
    try:
        inbox_dismiss(user=page_user(request), entry_id=entry)
    except NotFoundError as exc:
        raise Http404(exc.message) from exc
    messages.success(request, "Dismissed.")
    return HttpResponseRedirect(reverse("planner-inbox"))


KEEP_ALIVE_SECONDS = 25.0  # a comment line this often keeps proxies from closing an idle stream
STREAM_SECONDS = 600.0  # then the stream ends and the browser opens it again


@require_GET
async def inbox_stream(request: HttpRequest) -> HttpResponseBase:
    """``GET /inbox/stream/``: the signed-in user's count now and whenever it changes (``event:
    count``), a comment every 25 s; 403 without a session (the header's script polls then)."""
    user_id = await db(_session_user_id)(request)
    if user_id is None:
        return HttpResponse("Sign in to follow your inbox.", status=403, content_type="text/plain")
    response = StreamingHttpResponse(_counts(user_id), content_type="text/event-stream")
    response["Cache-Control"] = "private, no-store"
    response["X-Accel-Buffering"] = "no"  # nginx: send each count as it comes
    return response


def _session_user_id(request: HttpRequest) -> int | None:
    """The session's user (a person: the sign-in backend never lets an agent's session through)."""
    user = request.user
    return user.pk if isinstance(user, User) and user.is_authenticated and user.is_active else None


def _count_of(user_id: int) -> int:
    """The user's count as they are now (deactivated meanwhile: nothing)."""
    user = User.objects.filter(pk=user_id, is_active=True).first()
    return inbox_count(user=user) if user is not None else 0


async def _counts(user_id: int) -> AsyncIterator[bytes]:
    yield b"retry: 3000\n\n"
    counts = inbox_follow(
        user_id=user_id,
        count=functools.partial(_count_of, user_id),
        idle_seconds=KEEP_ALIVE_SECONDS,
        for_seconds=STREAM_SECONDS,
    )
    try:
        async for count in counts:
            yield b": keep-alive\n\n" if count is None else f"event: count\ndata: {count}\n\n".encode()
    finally:
        await counts.aclose()
