"""What recording an event reads, in SQL (docs/architecture.md#the-hot-path-in-sql, docs/events.md).

Every write that records an activity records its events in the same transaction
(``tracker/services/events.py``) and, there too, queues what they cause: whom a ticket's move
concerns, whether a ticket became runnable, which webhooks want it. Composed by the ORM, those
few reads cost a write two to ten times what the database spends answering them (a union of
three queries, two ``EXISTS``); here each is one statement written once, for SQLite and
PostgreSQL alike, prepared on PostgreSQL. Each has a test against its ORM twin
(``tests/tracker/test_event_rows.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from tracker.db import sql
from tracker.db.plan_rows import held_sql
from tracker.models import ClaimStatus
from tracker.models.plan import RESOLVED_STATES


@dataclass(frozen=True)
class TicketAudience:
    """A ticket of a project, and who hears of its moves: its watchers and claim holders."""

    number: int
    title: str
    audience: frozenset[int]  # its watchers and active claims' holders
    named: Mapping[int, int] = field(default_factory=dict)  # a claim asked for (ended too) → its holder


@dataclass(frozen=True)
class TicketsAsked:
    """The tickets of one project whose audience a batch of events asks for: ``numbers``; the
    claims the events name (``claims``); with ``every``, those no one hears of too."""

    project_id: int
    numbers: tuple[int, ...]
    claims: tuple[int, ...] = ()
    every: bool = False


def ticket_audiences_statement(asked: TicketsAsked) -> sql.Statement:
    """The statement :func:`ticket_audiences` runs (to read it ahead with the events' INSERT)."""
    numbered = sql.placeholders(len(asked.numbers))
    statement = (
        "SELECT i.number, i.title, w.user_id, CAST(NULL AS BIGINT) FROM tracker_watch w"  # noqa: S608 - placeholders only
        f" JOIN tracker_item i ON i.id = w.item_id WHERE i.project_id = %s AND i.number IN ({numbered})"
        " UNION ALL SELECT i.number, i.title, c.holder_id, NULL FROM tracker_claim c"
        " JOIN tracker_item i ON i.id = c.item_id"
        f" WHERE i.project_id = %s AND i.number IN ({numbered}) AND c.status = %s"
    )
    params: list[Any] = [
        asked.project_id,
        *asked.numbers,
        asked.project_id,
        *asked.numbers,
        ClaimStatus.ACTIVE,
    ]
    if asked.claims:
        statement += (
            " UNION ALL SELECT i.number, i.title, c.holder_id, c.id FROM tracker_claim c"  # noqa: S608 - placeholders only
            " JOIN tracker_item i ON i.id = c.item_id"
            f" WHERE i.project_id = %s AND i.number IN ({numbered})"
            f" AND c.project_id = %s AND c.id IN ({sql.placeholders(len(asked.claims))})"
        )
        params += [asked.project_id, *asked.numbers, asked.project_id, *asked.claims]
    if asked.every:
        statement += (
            " UNION ALL SELECT number, title, NULL, NULL FROM tracker_item"  # noqa: S608 - placeholders only
            f" WHERE project_id = %s AND number IN ({numbered})"
        )
        params += [asked.project_id, *asked.numbers]
    return statement, params


def ticket_audiences(asked: TicketsAsked) -> dict[int, TicketAudience]:
    """Number → the ticket, for those asked that someone watches or holds a claim on (an active
    claim, or one of the claims asked: ``named``, each event telling its own claim's holder); with
    ``every``, the others too (an empty audience)."""
    if not asked.numbers:
        return {}
    found: dict[int, tuple[str, set[int], dict[int, int]]] = {}
    for number, title, user_id, claim_id in sql.rows(*ticket_audiences_statement(asked)):
        _, users, named = found.setdefault(number, (title, set(), {}))
        if claim_id is not None:
            named[claim_id] = user_id
        elif user_id is not None:
            users.add(user_id)
    return {
        number: TicketAudience(number, title, frozenset(users), named)
        for number, (title, users, named) in found.items()
    }


@dataclass(frozen=True)
class Candidates:
    """Tickets that may have become runnable: the project's items numbered ``numbers`` or, with
    ``dependents``, the items those block; or (``ids``) these items."""

    project_id: int | None = None
    numbers: tuple[int, ...] = ()
    dependents: bool = False
    ids: tuple[int, ...] = ()

    def where(self) -> sql.Statement:
        """The condition on the item ``i`` that selects them."""
        if self.ids:
            return f"i.id IN ({sql.placeholders(len(self.ids))})", list(self.ids)
        numbered = f"number IN ({sql.placeholders(len(self.numbers))})"
        if self.dependents:
            return (
                "i.id IN (SELECT d.blocked_id FROM tracker_dependency d JOIN tracker_item b"  # noqa: S608 - placeholders only
                f" ON b.id = d.blocker_id WHERE b.project_id = %s AND b.{numbered})",
                [self.project_id, *self.numbers],
            )
        return f"i.project_id = %s AND i.{numbered}", [self.project_id, *self.numbers]

    def __bool__(self) -> bool:
        return bool(self.ids or self.numbers)


def candidate_ids(candidates: Candidates) -> set[int]:
    """The ids of the items ``candidates`` selects."""
    if not candidates:
        return set()
    where, params = candidates.where()
    return {item_id for (item_id,) in sql.rows(f"SELECT i.id FROM tracker_item i WHERE {where}", params)}  # noqa: S608 - placeholders only


@dataclass(frozen=True)
class RunnableTicket:
    id: int
    project_id: int
    organization_id: int
    key: str
    title: str
    priority: str
    labels: list[str]


def runnable_statement(candidates: Candidates) -> sql.Statement:
    """The statement :func:`runnable_among` runs (to read it ahead with the events' INSERT)."""
    where, params = candidates.where()
    holds, held_at = held_sql("c")
    return (
        "SELECT i.id, i.project_id, p.organization_id, p.key, i.number, i.title, i.priority, i.labels"  # noqa: S608 - placeholders only
        " FROM tracker_item i JOIN tracker_project p ON p.id = i.project_id"
        f" WHERE {where} AND i.kind = 'ticket' AND i.state = 'ready'"
        " AND NOT EXISTS (SELECT 1 FROM tracker_dependency d JOIN tracker_item b ON b.id = d.blocker_id"
        f" WHERE d.blocked_id = i.id AND b.state NOT IN ({sql.placeholders(len(RESOLVED_STATES))}))"
        f" AND NOT EXISTS (SELECT 1 FROM tracker_claim c WHERE c.item_id = i.id AND {holds})"
        " ORDER BY i.id",
        [*params, *RESOLVED_STATES, *held_at],
    )


def runnable_among(candidates: Candidates) -> list[RunnableTicket]:
    """Those of ``candidates`` that are runnable now, by id: ready tickets whose blockers are all
    resolved and that no claim holds (``tracker.selectors.runnable_tickets``, less the lapsed
    claims' tickets still in progress: those become runnable when the sweep ends the claim)."""
    if not candidates:
        return []
    return [
        RunnableTicket(
            id=item_id,
            project_id=project_id,
            organization_id=organization_id,
            key=f"{key}-{number}",
            title=title,
            priority=priority,
            labels=list(sql.json_out(labels) or []),
        )
        for item_id, project_id, organization_id, key, number, title, priority, labels in sql.rows(
            *runnable_statement(candidates)
        )
    ]


@dataclass(frozen=True)
class WebhookWanting:
    """An enabled endpoint, as queuing a delivery reads it."""

    id: int
    project_id: int
    types: list[str]
    created_by_id: int | None


def webhooks_enabled_statement(project_ids: Collection[int]) -> sql.Statement:
    """The statement :func:`webhooks_enabled` runs (to read it ahead with the events' INSERT)."""
    return (
        "SELECT id, project_id, types, created_by_id FROM tracker_webhook"  # noqa: S608 - placeholders only
        f" WHERE enabled = %s AND project_id IN ({sql.placeholders(len(project_ids))}) ORDER BY id",
        [True, *sorted(project_ids)],
    )


def webhooks_enabled(project_ids: Collection[int]) -> list[WebhookWanting]:
    """The enabled webhooks of ``project_ids``, by id."""
    if not project_ids:
        return []
    return [
        WebhookWanting(hook_id, project_id, list(sql.json_out(types) or []), created_by_id)
        for hook_id, project_id, types, created_by_id in sql.rows(*webhooks_enabled_statement(project_ids))
    ]
