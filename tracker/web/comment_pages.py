"""A ticket's comments and its watch toggle on its page (docs/architecture.md#the-plan-and-ticket-pages).

The item page includes ``tracker/_comments.html``, whose template tag (``item_comments``) reads
:func:`tracker.comment_selectors.comment_thread` for the reader. The form posts to
:func:`comment_page` and the toggle to :func:`watch_page`; each decides access afresh (404 for
whoever cannot read the project, 403 for a viewer's comment), calls one service and goes back to
the ticket with a message. A comment refused (empty, too long, NUL) stores nothing: the ticket's
page says why and gives the text back in the form.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.views.decorators.http import require_POST

from tracker.comment_selectors import MAX_BODY, draft_key
from tracker.errors import NotFoundError, PermissionDeniedError, ValidationError
from tracker.models import Item
from tracker.page_links import item_url
from tracker.selectors import item_get
from tracker.services.activity import Actor
from tracker.services.comments import comment_add, watch_set
from tracker.web.page_helpers import page_project, page_user, with_csp

MAX_DRAFT = MAX_BODY + 1000  # a refused comment given back to its writer; past this it is cut
FORM_ANCHOR = "comment-form"


def _target(request: HttpRequest, key: str, item_key: str) -> tuple[User, Item]:
    """The signed-in reader and the item, through the one permission check (404 if unreadable)."""
    user = page_user(request)
    project = page_project(user, key)
    try:
        return user, item_get(project=project, key=item_key)
    except NotFoundError as exc:
        raise Http404("Item not found.") from exc


def _back(item: Item, anchor: str) -> HttpResponseRedirect:
    return HttpResponseRedirect(f"{item_url(item.project.key, item.key)}#{anchor}")


@require_POST
@login_required
@with_csp
def comment_page(request: HttpRequest, key: str, item_key: str) -> HttpResponse:
    """``POST /projects/{key}/items/{item_key}/comments/``: ``body``, Markdown."""
    user, item = _target(request, key, item_key)
    body = request.POST.get("body", "")
    try:
        comment = comment_add(actor=Actor(user=user), item=item, body=body)
    except PermissionDeniedError as exc:
        raise PermissionDenied(exc.message) from exc
    except ValidationError as exc:
        messages.error(request, f"Your comment was not saved: {' '.join(exc.messages)}")
        request.session[draft_key(item)] = body.replace("\x00", "\ufffd")[:MAX_DRAFT]
        return _back(item, FORM_ANCHOR)
    messages.success(request, f"Your comment on {item.key} was added.")
    return _back(item, f"comment-{comment.pk}")


@require_POST
@login_required
@with_csp
def watch_page(request: HttpRequest, key: str, item_key: str) -> HttpResponse:
    """``POST /projects/{key}/items/{item_key}/watch/``: ``watch`` is ``on`` or ``off``."""
    user, item = _target(request, key, item_key)
    choice = request.POST.get("watch", "")
    if choice not in ("on", "off"):
        messages.error(request, "Choose Watch or Unwatch.")
        return _back(item, "comments-heading")
    now = watch_set(user=user, item=item, on=choice == "on")
    done = "You watch" if now else "You no longer watch"
    messages.success(request, f"{done} {item.key}.")
    return _back(item, "comments-heading")
