"""Template filters of the pages: a state or kind as words, a moment as how long ago it was."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()


@register.filter
def words(value: object) -> str:
    """``in_progress`` → ``in progress``: a state, kind or status as the pages say it."""
    return str(value).replace("_", " ")


@register.filter
def ago(value: datetime | None) -> str:
    """How long ago ``value`` was, in words: "just now" within the first minute, else "5 minutes ago"."""
    if value is None:
        return ""
    if timezone.now() - value < timedelta(minutes=1):
        return "just now"
    return f"{timesince(value)} ago"
