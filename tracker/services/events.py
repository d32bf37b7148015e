"""Events (docs/events.md): every activity recorded as a typed event, in the activity's transaction.

:func:`events_from_activity` is called by ``activity_record`` for every activity; the verbs that
concern nobody outside (a skill pinned, a key revoked) make no event. Two kinds of events have no
activity of their own: ``item.runnable`` (a ticket became runnable: a blocker was resolved, a
dependency removed, a ticket made ready) and ``request.waiting`` (a request or approval of a chat
waits for its human). What an event causes is queued in the same transaction (an outbox): the
deliveries of the project's webhooks and the notifications of the people it concerns. Once it
commits, the waiters of the project's feed are woken, in every process (``events_recorded``).

An event is readable exactly as the object it is about: by the project's readers; an entry of
knowledge linked to several projects only by those who read every one of them (``requires``);
a request only by the human of its chat (``private_to``). Organization-wide knowledge has no
project: it is in every project's feed of the organization.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator
from typing import Any, Final

from django.contrib.auth.models import User
from django.db.models import Exists, OuterRef
from django.utils import timezone

from tracker.commit_hooks import on_commit_robust
from tracker.models import ActivityEvent, Claim, Dependency, Event, Item, ItemKind, Organization, Project
from tracker.models.plan import RESOLVED_STATES
from tracker.selectors import unresolved_blockers
from tracker.services import notifications, webhooks
from tracker.signals import events_recorded
from tracker.work_selectors import held

# The catalogue (docs/events.md#the-catalogue), in the order the docs list it.
EVENT_TYPES: Final = (
    "item.created",
    "item.updated",
    "item.runnable",
    "changeset.proposed",
    "changeset.applied",
    "changeset.rejected",
    "knowledge.created",
    "knowledge.updated",
    "claim.taken",
    "claim.released",
    "claim.expired",
    "report.added",
    "question.asked",
    "question.answered",
    "question.needs_human",
    "request.waiting",
    "comment.added",
    "member.added",
    "member.removed",
)

# An activity's verb → its event's type; a verb not named here makes no event.
VERB_TYPES: Final[dict[str, str]] = {
    "item.created": "item.created",
    "item.updated": "item.updated",
    "dependency.added": "item.updated",
    "dependency.removed": "item.updated",
    "changeset.proposed": "changeset.proposed",
    "changeset.applied": "changeset.applied",
    "changeset.rejected": "changeset.rejected",
    "knowledge.created": "knowledge.created",
    "knowledge.updated": "knowledge.updated",
    "claim.taken": "claim.taken",
    "claim.released": "claim.released",
    "claim.expired": "claim.expired",
    "report.added": "report.added",
    "question.asked": "question.asked",
    "question.reused": "question.answered",  # answered at once by an earlier answer
    "question.answered": "question.answered",
    "question.needs_human": "question.needs_human",
    "comment.added": "comment.added",
    "invitation.accepted": "member.added",
    "agent.created": "member.added",
    "membership.removed": "member.removed",
}

# Tickets that may have become runnable inside a block that changes many at once (a changeset's
# apply): checked once, at its end, rather than after each of its operations.
_deferred: contextvars.ContextVar[set[int] | None] = contextvars.ContextVar("runnable_deferred", default=None)


def events_from_activity(activity: ActivityEvent) -> list[Event]:
    """The events of ``activity`` (recorded by ``activity_record``, in its transaction, under the
    organization's row lock)."""
    actor, project = activity.actor, activity.project
    kind = VERB_TYPES.get(activity.verb)
    if kind is None:
        return []
    data = {"target": activity.target, **activity.data}
    base = {
        "organization_id": activity.organization_id,
        "type": kind,
        "actor": actor,
        "on_behalf_of_id": activity.on_behalf_of_id,
        "target": activity.target,
    }
    if kind.startswith("knowledge."):
        events = _knowledge_events(base, data, activity.organization_id)
    else:
        events = [Event(project=project, data=data, **base)]
    recorded = _recorded(events)
    if project is not None:
        _runnable_after(activity, project, actor)
    return recorded


def event_record(
    *,
    project: Project,
    type: str,
    actor: str,
    on_behalf_of: User | None,
    target: str,
    data: dict[str, Any],
    private_to: User | None = None,
) -> Event:
    """An event with no activity of its own (``item.runnable``, ``request.waiting``); call it in the
    transaction of the change it reports."""
    if type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {type!r}")
    # The organization's row lock, as an activity takes it: ids increase in commit order.
    list(Organization.objects.select_for_update().filter(pk=project.organization_id).values_list("pk"))
    event = Event(
        organization_id=project.organization_id,
        project=project,
        type=type,
        actor=actor,
        on_behalf_of=on_behalf_of,
        target=target,
        data={"target": target, **data},
        private_to=private_to,
    )
    return _recorded([event])[0]


@contextlib.contextmanager
def runnable_deferred(*, actor: str, on_behalf_of: User) -> Iterator[None]:
    """Inside, tickets that may become runnable are checked once, at the end (a changeset's
    apply creates tickets and then their dependencies: none of them was ever runnable between)."""
    if _deferred.get() is not None:
        yield
        return
    candidates: set[int] = set()
    token = _deferred.set(candidates)
    try:
        yield
    finally:
        _deferred.reset(token)
    _runnable_record(candidates, actor=actor, on_behalf_of_id=on_behalf_of.pk)


def _recorded(events: list[Event]) -> list[Event]:
    created = Event.objects.bulk_create(events)
    webhooks.deliveries_queue(created)
    notifications.notifications_queue(created)
    project_ids = {event.project_id for event in created if event.project_id is not None}
    organization_ids = {event.organization_id for event in created if event.project_id is None}
    on_commit_robust(_tell, project_ids, organization_ids)
    return created


def _tell(project_ids: set[int], organization_ids: set[int]) -> None:
    """Wake the feeds' waiters: of the projects, and of every project of the organizations."""
    if organization_ids:
        project_ids = project_ids | set(
            Project.objects.filter(organization_id__in=organization_ids).values_list("pk", flat=True)
        )
    events_recorded.send_robust(sender=Event, project_ids=sorted(project_ids))


def _knowledge_events(base: dict[str, Any], data: dict[str, Any], organization_id: int) -> list[Event]:
    """One event per project the entry is linked to, each readable by who reads them all; an entry
    linked to none: one event of the organization."""
    keys = data.get("projects") or []
    projects = list(Project.objects.filter(organization_id=organization_id, key__in=keys))
    if not projects:
        return [Event(project=None, data=data, **base)]
    requires = sorted(project.pk for project in projects) if len(projects) > 1 else []
    return [Event(project=project, data=data, requires=requires, **base) for project in projects]


def _runnable_after(activity: ActivityEvent, project: Project, actor: str) -> None:
    """Tickets that ``activity`` may have made runnable, checked now (or at the end of the block
    that defers them)."""
    candidates = _candidates(activity, project)
    if not candidates:
        return
    deferred = _deferred.get()
    if deferred is not None:
        deferred.update(candidates)
        return
    _runnable_record(candidates, actor=actor, on_behalf_of_id=activity.on_behalf_of_id)


def _candidates(activity: ActivityEvent, project: Project) -> set[int]:
    """The tickets ``activity`` may have made runnable: one created or made ready, the blocked one of
    a dependency removed, the dependents of one resolved."""
    verb, data = activity.verb, activity.data
    state = (data.get("changes") or {}).get("state") if verb == "item.updated" else None
    made_ready = (verb == "item.created" and data.get("state") == "ready") or (state and state[1] == "ready")
    if made_ready or verb == "dependency.removed":
        return _ids(project, [activity.target])
    if state and state[1] in RESOLVED_STATES:
        resolved = _ids(project, [activity.target])
        return set(Dependency.objects.filter(blocker_id__in=resolved).values_list("blocked_id", flat=True))
    return set()


def _ids(project: Project, keys: Iterable[str]) -> set[int]:
    numbers = [int(key.rsplit("-", 1)[1]) for key in keys if key.rsplit("-", 1)[-1].isdigit()]
    return set(Item.objects.filter(project=project, number__in=numbers).values_list("pk", flat=True))


def _runnable_record(candidates: set[int], *, actor: str, on_behalf_of_id: int | None) -> None:
    """An ``item.runnable`` event for each of ``candidates`` that is runnable now."""
    if not candidates:
        return
    claimed = Claim.objects.filter(held(timezone.now()), item=OuterRef("pk"))
    runnable = (
        Item.objects.filter(pk__in=candidates, kind=ItemKind.TICKET, state="ready")
        .exclude(Exists(unresolved_blockers(blocked=OuterRef("pk"))))
        .exclude(Exists(claimed))
        .select_related("project")
        .order_by("pk")
    )
    events = [
        Event(
            organization_id=item.project.organization_id,
            project=item.project,
            type="item.runnable",
            actor=actor,
            on_behalf_of_id=on_behalf_of_id,
            target=item.key,
            data={
                "target": item.key,
                "title": item.title,
                "priority": item.priority,
                "labels": list(item.labels),
            },
        )
        for item in runnable
    ]
    if events:
        _recorded(events)
