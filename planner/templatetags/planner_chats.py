"""Template tags of the planner for other apps' pages: how many chats wait for the reader.

The tracker's home page shows each project's count without importing the
planner (dependencies point from the planner to the tracker, never back).
"""

from __future__ import annotations

from typing import Any

from django import template

from planner.domain.selectors import session_waiting_count
from tracker.models import Project

register = template.Library()


@register.simple_tag(takes_context=True)
def waiting_chats(context: dict[str, Any], project: Project) -> int:
    """``{% waiting_chats project as n %}``: the chats of ``project`` waiting for the request's user."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return 0
    return session_waiting_count(user=user, project=project)
