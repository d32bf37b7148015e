"""Reading a project's events (docs/events.md#the-feed): what a reader may see, in id order.

A reader sees the project's events and the organization's (knowledge linked to no project), minus
those about an object they may not read: knowledge linked to other projects too that they cannot
read (``requires``), a request of another user's chat (``private_to``). Their access is checked at
every read, so someone removed from the project reads nothing more from the next read on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Protocol

from django.db.models import Max, Q

from tracker.models import Event, Project
from tracker.trust.permissions import TRACKER_READ, Principal, project_ids_with, require

MAX_EVENTS: Final = 100  # a read answers at most this many


@dataclass(frozen=True)
class EventPage:
    """Events after a cursor, and the cursor to read on from: the last event read, whether or not
    the reader could see it or asked for its type, so that no event is read twice."""

    events: list[dict[str, Any]]
    next: int


def event_json(event: Event) -> dict[str, Any]:
    """An event as the feed, the stream, MCP and webhooks show it (docs/events.md#the-catalogue)."""
    return {
        "id": event.pk,
        "type": event.type,
        "project": event.project.key if event.project is not None else None,
        "actor": event.actor,
        "target": event.target,
        "created_at": event.created_at.isoformat(),
        "data": event.data,
    }


class Visibility(Protocol):
    """What decides who may read an event: an :class:`Event`, or a :class:`FeedRow` of it."""

    @property
    def project_id(self) -> int | None: ...
    @property
    def private_to_id(self) -> int | None: ...
    @property
    def requires(self) -> list[int]: ...


def event_readable(event: Visibility, *, user: Principal | None, readable: set[int]) -> bool:
    """Whether ``user``, who reads the projects ``readable``, may read ``event``."""
    if event.private_to_id is not None and getattr(user, "pk", user) != event.private_to_id:
        return False
    if event.project_id is not None and event.project_id not in readable:
        return False
    return all(project_id in readable for project_id in event.requires)


def events_after(
    *,
    user: Principal | None,
    project: Project,
    after: int,
    types: tuple[str, ...] = (),
    limit: int = MAX_EVENTS,
) -> EventPage:
    """The events of ``project`` after id ``after`` that ``user`` may read, oldest first."""
    require(user, project, TRACKER_READ)
    readable = set(project_ids_with(user, TRACKER_READ))
    found = Event.objects.filter(
        Q(project=project) | Q(project__isnull=True, organization_id=project.organization_id), id__gt=after
    )
    if types:
        found = found.filter(type__in=types)
    limit = max(1, min(limit, MAX_EVENTS))
    rows = list(found.select_related("project").order_by("id")[:limit])
    visible = [event_json(event) for event in rows if event_readable(event, user=user, readable=readable)]
    last = rows[-1].pk if rows else after
    if len(rows) < limit:  # read to the end: on from the organization's newest event
        last = max(last, _organization_head(project))
    return EventPage(visible, last)


@dataclass(frozen=True)
class FeedRow:
    """An event as plain data, with what decides who may read it (:func:`event_readable`)."""

    id: int
    type: str
    project_id: int | None
    private_to_id: int | None
    requires: list[int]
    json: dict[str, Any]


@dataclass(frozen=True)
class FeedRead:
    """The events of a project after an id, for every reader at once (``planner/live/event_feed.py``),
    unfiltered: each reader's types and visibility are applied to them afterwards. ``through``: every
    event of the project up to this id is among ``rows`` (or before the id read after)."""

    rows: list[FeedRow]
    through: int


def events_read_for_all(*, project: Project, after: int, limit: int) -> FeedRead:
    """Every event of ``project`` (and of its organization alone) after ``after``, at most
    ``limit``, whoever may read them: no access check here, the caller filters per reader."""
    head = _organization_head(project)  # first: an event at or below it is committed, so read below
    found = Event.objects.filter(
        Q(project=project) | Q(project__isnull=True, organization_id=project.organization_id), id__gt=after
    )
    events = list(found.select_related("project").order_by("id")[:limit])
    rows = [
        FeedRow(e.pk, e.type, e.project_id, e.private_to_id, list(e.requires), event_json(e)) for e in events
    ]
    last = rows[-1].id if rows else after
    through = last if len(rows) == limit else max(last, head)
    return FeedRead(rows, through)


def _organization_head(project: Project) -> int:
    """The newest event of the project's organization. Events of an organization are recorded under
    its row lock (``tracker/services/events.py``): none committed later can have a smaller id, so a
    reader who read to it misses nothing by reading on after it."""
    newest = Event.objects.filter(organization_id=project.organization_id).aggregate(newest=Max("id"))
    return newest["newest"] or 0


def event_head(*, user: Principal | None, project: Project) -> int:
    """The id of the project's newest event (0: none): where a reader who wants only what comes
    next starts (``after=now``)."""
    require(user, project, TRACKER_READ)
    newest = (
        Event.objects.filter(
            Q(project=project) | Q(project__isnull=True, organization_id=project.organization_id)
        )
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )
    return newest or 0
