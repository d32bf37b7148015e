"""The inbox's count for every page's header (``templates/base.html``), which the tracker's and the
knowledge base's pages share without importing the planner.

One statement after the reader's access, which the request's other checks have usually read
already (``planner/domain/inbox.py``: ``inbox_count``); nothing for an anonymous reader.
"""

from __future__ import annotations

from typing import Any

from django import template

from planner.domain.inbox import inbox_count

register = template.Library()


@register.simple_tag(takes_context=True)
def inbox_waiting(context: dict[str, Any]) -> int | None:
    """``{% inbox_waiting as n %}``: how many entries wait in the reader's inbox; None when nobody
    is signed in."""
    user = getattr(context.get("request"), "user", None)
    if user is None or not user.is_authenticated:
        return None
    return inbox_count(user=user)
