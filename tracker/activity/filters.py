"""Which activity events a reader may see beyond their projects: filters by verb prefix.

The activity log is the tracker's, but some of its events describe objects of
the apps built on it, and carry what those objects say (a knowledge entry's
title). Who may read such an object is that app's rule, and the tracker never
imports those apps (``docs/architecture.md``): an app registers, in its
``AppConfig.ready()``, the condition under which an event of its verbs is
visible, and the activity admin applies every registered one
(:func:`activity_visible`).
"""

from __future__ import annotations

from typing import Protocol

from django.db.models import Q, QuerySet

from tracker.models import ActivityEvent
from tracker.trust.permissions import Principal


class ActivityFilter(Protocol):
    """The condition on :class:`ActivityEvent` under which ``user`` may see an event of the prefix."""

    def __call__(self, *, user: Principal | None) -> Q: ...


_FILTERS: dict[str, ActivityFilter] = {}


def activity_filter_register(*, verb_prefix: str, visible: ActivityFilter) -> None:
    """Show the events whose verb starts with ``verb_prefix`` only where ``visible`` holds.

    One filter a prefix: registering the same one again (a second ``ready()``) changes nothing,
    another one is a configuration error, since two apps would both claim the verbs."""
    if not verb_prefix.endswith("."):
        raise ValueError(f"A verb prefix ends with a dot: {verb_prefix!r}.")
    if _FILTERS.setdefault(verb_prefix, visible) is not visible:
        raise ValueError(f"The activity events {verb_prefix}* already have a filter.")


def activity_filter_unregister(*, verb_prefix: str) -> None:
    """Forget the filter of ``verb_prefix`` (tests that register their own)."""
    _FILTERS.pop(verb_prefix, None)


def activity_visible(events: QuerySet[ActivityEvent], *, user: Principal | None) -> QuerySet[ActivityEvent]:
    """``events`` without those a registered filter hides from ``user``. A filter's empty ``Q()``
    hides nothing, as ``filter(Q())`` keeps everything (``~Q()`` would vanish from the ``&``)."""
    for prefix, visible in sorted(_FILTERS.items()):
        condition = visible(user=user)
        if condition:
            events = events.exclude(Q(verb__startswith=prefix) & ~condition)
    return events
