"""The ticket page's comments and watch toggle, read for the reader where the page includes them
(``tracker/_comments.html``): the item page's view needs no change to show them."""

from __future__ import annotations

from typing import Any

from django import template
from django.contrib.auth.models import User

from tracker.comment_selectors import CommentThread, comment_thread, draft_key
from tracker.models import Item

register = template.Library()


@register.simple_tag(takes_context=True)
def item_comments(context: dict[str, Any], item: Item) -> CommentThread | None:
    """``item``'s comments as the signed-in reader sees them, with the comment of theirs the last
    post refused (``tracker.web.comment_pages``) given back once; None without a reader."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if request is None or not isinstance(user, User):
        return None
    session = getattr(request, "session", None)
    draft = session.pop(draft_key(item), "") if session is not None else ""
    return comment_thread(
        user=user, project=item.project, item=item, draft=draft if isinstance(draft, str) else ""
    )
