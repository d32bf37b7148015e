"""Template filters of the plan pages: a state or kind as words."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def words(value: object) -> str:
    """``in_progress`` → ``in progress``: a state, kind or status as the pages say it."""
    return str(value).replace("_", " ")
