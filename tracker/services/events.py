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
from dataclasses import dataclass
from typing import Any, Final

from django.contrib.auth.models import User

from tracker.commit_hooks import on_commit_robust
from tracker.db import event_rows, model_rows, sql
from tracker.db.event_rows import Candidates
from tracker.models import ActivityEvent, Event, Organization, Project
from tracker.models.plan import RESOLVED_STATES
from tracker.services import notifications, webhooks
from tracker.services.notify_audience import tickets_asked
from tracker.signals import events_recorded

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
NONE: Final = Candidates()  # no ticket to check
_deferred: contextvars.ContextVar[set[int] | None] = contextvars.ContextVar("runnable_deferred", default=None)


@dataclass
class _Gathered:
    """An activity's events held for :func:`events_gathered`'s one recording, with what they may
    have made runnable and who they are recorded for."""

    events: list[Event]
    candidates: Candidates
    actor: str
    on_behalf_of_id: int | None
    project: Project | None


# The events of the activities of a block that records several (a claim: the ticket's state, the
# claim), recorded together at its end: one round trip for all of them.
_gathering: contextvars.ContextVar[list[_Gathered] | None] = contextvars.ContextVar(
    "events_gathering", default=None
)


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
    candidates = _candidates(activity, project) if project is not None else NONE
    deferred = _deferred.get()
    if candidates and deferred is not None:
        deferred.update(event_rows.candidate_ids(candidates))
        candidates = NONE
    entry = _Gathered(events, candidates, actor, activity.on_behalf_of_id, project)
    gathering = _gathering.get()
    if gathering is not None:
        gathering.append(entry)
    else:
        _record_with_runnable([entry])
    return events


@contextlib.contextmanager
def events_gathered() -> Iterator[None]:
    """Inside (a transaction), the events of every activity recorded are held and recorded
    together as the block ends, in their order: one round trip for a write that records several
    activities, where each would take its own. Code inside must not read the events it recorded,
    nor go on after an error of a savepoint that recorded an activity (its events would still be
    held); a block that raises records nothing (its transaction is rolled back). Nested, the
    outer block records them."""
    if _gathering.get() is not None:
        yield
        return
    gathered: list[_Gathered] = []
    token = _gathering.set(gathered)
    try:
        yield
    finally:
        _gathering.reset(token)
    if gathered:
        _record_with_runnable(gathered)


def _record_with_runnable(gathered: list[_Gathered]) -> None:
    """Record the events of ``gathered`` in one round trip with the read of which of the first
    one's candidates are runnable now, then an ``item.runnable`` event for each that is (the
    candidates of the rest, rarely any, each read on its own)."""
    checked = [entry for entry in gathered if entry.candidates]
    first = checked[0] if checked else None
    runnable = _record(
        [event for entry in gathered for event in entry.events],
        runnable=first.candidates if first is not None else NONE,
    )
    for entry in checked:
        if entry is not first:
            runnable = event_rows.runnable_among(entry.candidates)
        if runnable:
            _record(
                _runnable_events(
                    runnable, actor=entry.actor, on_behalf_of_id=entry.on_behalf_of_id, project=entry.project
                )
            )


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
    _record([event])
    return event


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


def _record(events: list[Event], *, runnable: Candidates = NONE) -> list[event_rows.RunnableTicket]:
    """INSERT ``events`` and queue what they cause (the outbox: webhooks' deliveries, people's
    notifications); once committed, wake the feeds' waiters. On PostgreSQL one round trip: the
    reads of what they cause go with the INSERT (read ahead), and so does, given ``runnable``, the
    read of which of those tickets are runnable now (its answer returned)."""
    statements = _caused_reads(events)
    if runnable:
        statements.append(event_rows.runnable_statement(runnable))
    with sql.reading_ahead(statements, with_next=True):
        model_rows.insert_returning(events)
        webhooks.deliveries_queue(events)
        notifications.notifications_queue(events)
        found = event_rows.runnable_among(runnable)
    project_ids = {event.project_id for event in events if event.project_id is not None}
    organization_ids = {event.organization_id for event in events if event.project_id is None}
    on_commit_robust(_tell, project_ids, organization_ids)
    return found


def _caused_reads(events: list[Event]) -> list[sql.Statement]:
    """What queuing the outbox of ``events`` reads: the projects' webhooks, the tickets' audiences."""
    project_ids = {event.project_id for event in events if event.project_id is not None}
    statements = [event_rows.webhooks_enabled_statement(project_ids)] if project_ids else []
    statements += [event_rows.ticket_audiences_statement(asked) for asked in tickets_asked(events)]
    return statements


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


def _candidates(activity: ActivityEvent, project: Project) -> Candidates:
    """The tickets ``activity`` may have made runnable: one created or made ready, the blocked one of
    a dependency removed, the dependents of one resolved."""
    verb, data = activity.verb, activity.data
    state = (data.get("changes") or {}).get("state") if verb == "item.updated" else None
    made_ready = (verb == "item.created" and data.get("state") == "ready") or (state and state[1] == "ready")
    numbers = tuple(sorted(_numbers([activity.target])))
    if numbers and (made_ready or verb == "dependency.removed"):
        return Candidates(project_id=project.pk, numbers=numbers)
    if numbers and state and state[1] in RESOLVED_STATES:
        return Candidates(project_id=project.pk, numbers=numbers, dependents=True)
    return NONE


def _numbers(keys: Iterable[str]) -> set[int]:
    tails = (key.rsplit("-", 1)[-1] for key in keys)
    return {int(tail) for tail in tails if tail.isascii() and tail.isdigit() and len(tail) < 10}


def _runnable_record(candidates: set[int], *, actor: str, on_behalf_of_id: int | None) -> None:
    """An ``item.runnable`` event for each of ``candidates`` that is runnable now."""
    runnable = event_rows.runnable_among(Candidates(ids=tuple(sorted(candidates))))
    if runnable:
        _record(_runnable_events(runnable, actor=actor, on_behalf_of_id=on_behalf_of_id))


def _runnable_events(
    runnable: list[event_rows.RunnableTicket],
    *,
    actor: str,
    on_behalf_of_id: int | None,
    project: Project | None = None,
) -> list[Event]:
    """An ``item.runnable`` event for each of ``runnable`` (``project``: the one they are known to
    be of, if any)."""
    projects = {project.pk: project} if project is not None else {}
    if missing := {ticket.project_id for ticket in runnable} - projects.keys():
        projects |= Project.objects.in_bulk(missing)
    return [
        Event(
            organization_id=ticket.organization_id,
            project=projects[ticket.project_id],
            type="item.runnable",
            actor=actor,
            on_behalf_of_id=on_behalf_of_id,
            target=ticket.key,
            data={
                "target": ticket.key,
                "title": ticket.title,
                "priority": ticket.priority,
                "labels": ticket.labels,
            },
        )
        for ticket in runnable
    ]
