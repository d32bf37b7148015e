"""``/inbox/``: what waits for the signed-in user across their projects, each entry linked and
dismissable by a plain form (no script needed). The selectors decide what is shown
(``planner/domain/inbox.py``); this only renders it and hands a dismissal to its service."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from planner.domain.inbox import MAX_ENTRIES, inbox_count, inbox_entries
from planner.domain.services.inbox import inbox_dismiss
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
