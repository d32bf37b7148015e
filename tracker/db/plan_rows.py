"""The plan as the planner's read tools show it, read in SQL (docs/architecture.md#the-hot-path-in-sql).

``list_items``, ``get_item`` and ``list_runnable`` run in most turns; composed by the ORM and
serialized by DRF they cost several times what the database spends answering them. Here each is
one statement (``get_item``: three, sent at once), read straight into the tools' JSON. What
they return is what the ORM path returns (``tracker.selectors``, the REST serializers): a claim
and a report read exactly as ``ClaimSerializer`` and ``ReportSerializer`` show them, which a
test holds them to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rest_framework import serializers

from tracker.db import sql
from tracker.models import ClaimStatus, Project
from tracker.models.plan import PRIORITY_RANK, RESOLVED_STATES

JsonObject = dict[str, Any]

_DATETIME = serializers.DateTimeField()  # the REST API's date-time format, with its time zone

# An item's list row: the parents' numbers are keys of the item's own project (docs/domain.md).
_ROW = "i.number, i.kind, i.title, i.state, i.version, e.number, m.number, i.priority, i.labels"
_ROW_FROM = (
    " FROM tracker_item i"
    " LEFT JOIN tracker_item e ON e.id = i.epic_id"
    " LEFT JOIN tracker_item m ON m.id = i.milestone_id"
)

# Runnable tickets are listed by priority (urgent first), as tracker.selectors.runnable_tickets does.
# The names and ranks are fixed in code (tracker.models.plan), never input: written into the SQL.
_PRIORITY_RANK = (
    "CASE i.priority "
    + " ".join(f"WHEN '{name}' THEN {rank}" for name, rank in PRIORITY_RANK.items())
    + f" ELSE {len(PRIORITY_RANK)} END"
)


def held_sql(alias: str) -> sql.Statement:
    """:func:`held` over the claim ``alias`` in SQL, at the moment the statement is sent."""
    return f"{alias}.status = %s AND {alias}.expires_at > %s", [ClaimStatus.ACTIVE, sql.NOW]


def lapsed_sql(alias: str) -> sql.Statement:
    """:func:`lapsed` over the claim ``alias`` in SQL, at the moment the statement is sent."""
    return f"{alias}.status = %s AND {alias}.expires_at <= %s", [ClaimStatus.ACTIVE, sql.NOW]


def _list_row(key: str, row: sql.Row) -> JsonObject:
    number, kind, title, state, version, epic, milestone, priority, labels = row[:9]
    return {
        "key": f"{key}-{number}",
        "kind": kind,
        "title": title,
        "state": state,
        "version": version,
        "epic": f"{key}-{epic}" if epic else None,
        "milestone": f"{key}-{milestone}" if milestone else None,
        "priority": priority,
        "labels": sql.json_out(labels),
    }


@dataclass(frozen=True)
class ItemListing:
    """A page of a project's items: by kind and state, under parents by id (``{"epic": 3}``)."""

    project: Project
    kind: str | None
    state: str | None
    parents: dict[str, int]
    limit: int
    offset: int


def item_rows(listing: ItemListing) -> tuple[list[JsonObject], bool]:
    """The page's items by number, each with the holder of the claim that holds it (its lease
    not run out: ``tracker.work_selectors.held``), and whether more follow, in one statement."""
    found = sql.rows(*item_rows_statement(listing))
    items = []
    for row in found[: listing.limit]:
        item = _list_row(listing.project.key, row)
        if row[9] is not None:
            item["claimed_by"] = row[9]
        items.append(item)
    return items, len(found) > listing.limit


def item_rows_statement(listing: ItemListing) -> sql.Statement:
    """The statement :func:`item_rows` runs (one row more than the page: whether more follow)."""
    where: list[str] = ["i.project_id = %s"]
    params: list[Any] = [listing.project.pk]
    for column, value in (("kind", listing.kind), ("state", listing.state)):
        if value:
            where.append(f"i.{column} = %s")
            params.append(value)
    for parent, parent_id in listing.parents.items():
        where.append(f"i.{parent}_id = %s")
        params.append(parent_id)
    holds, at = held_sql("c")
    return (
        f"SELECT {_ROW}, u.username{_ROW_FROM}"
        f" LEFT JOIN tracker_claim c ON c.item_id = i.id AND {holds}"
        " LEFT JOIN auth_user u ON u.id = c.holder_id"
        f" WHERE {' AND '.join(where)} ORDER BY i.number LIMIT %s OFFSET %s",
        [*at, *params, listing.limit + 1, listing.offset],
    )


def runnable_rows(*, project: Project, limit: int) -> list[JsonObject]:
    """The project's runnable tickets by priority, then number
    (:func:`tracker.selectors.runnable_tickets`), in one statement."""
    return [
        _list_row(project.key, row) for row in sql.rows(*runnable_statement(project=project, limit=limit))
    ]


def runnable_statement(*, project: Project, limit: int) -> sql.Statement:
    """The statement :func:`runnable_rows` runs: a ticket whose claim lapsed unswept is runnable as
    the sweep will leave it (``in_progress`` goes back to ``ready``)."""
    holds, held_at = held_sql("c")
    ran_out, lapsed_at = lapsed_sql("l")
    return (
        f"SELECT {_ROW}{_ROW_FROM}"  # noqa: S608 - fixed columns; values are parameters
        " WHERE i.project_id = %s AND i.kind = 'ticket' AND (i.state = 'ready' OR (i.state = 'in_progress'"
        f" AND EXISTS (SELECT 1 FROM tracker_claim l WHERE l.item_id = i.id AND {ran_out})))"
        " AND NOT EXISTS (SELECT 1 FROM tracker_dependency d JOIN tracker_item b ON b.id = d.blocker_id"
        f" WHERE d.blocked_id = i.id AND b.state NOT IN ({sql.placeholders(len(RESOLVED_STATES))}))"
        f" AND NOT EXISTS (SELECT 1 FROM tracker_claim c WHERE c.item_id = i.id AND {holds})"
        f" ORDER BY {_PRIORITY_RANK}, i.number LIMIT %s",
        [project.pk, *lapsed_at, *RESOLVED_STATES, *held_at, limit],
    )


REPORTS_SHOWN = 5  # get_item's newest reports on the ticket; get_brief has more
COMMENTS_SHOWN = 10  # get_item's newest comments on the item; REST lists them all
_ITEM_ID = "(SELECT id FROM tracker_item WHERE project_id = %s AND number = %s)"


def item_detail(*, project: Project, number: int) -> JsonObject | None:
    """The item numbered ``number`` in ``project`` as ``get_item`` shows it (its dependencies, the
    claim that holds it, its newest reports and comments), in four statements sent at once; None if
    there is none."""
    item_rows_, dependency_rows, report_rows, comment_rows = sql.result_sets(
        item_detail_statements(project=project, number=number)
    )
    if not item_rows_:
        return None
    (found,) = item_rows_
    kind, title, state, version, epic_project, epic, milestone_project, milestone = found[1:9]
    description, criteria, policy, priority, labels = found[9:14]
    key = f"{project.key}-{number}"
    blocked_by, blocks = _dependencies(dependency_rows)
    return {
        "key": key,
        "kind": kind,
        "title": title,
        "state": state,
        "version": version,
        "epic": f"{epic_project}-{epic}" if epic is not None else None,
        "milestone": f"{milestone_project}-{milestone}" if milestone is not None else None,
        "description": description,
        "acceptance_criteria": sql.json_out(criteria),
        "policy": sql.json_out(policy),
        "priority": priority,
        "labels": sql.json_out(labels),
        "blocked_by": blocked_by,
        "blocks": blocks,
        "claim": _claim(key, title, found[14:]),
        "reports": [_report(key, row) for row in report_rows],
        "comments": [_comment(row) for row in comment_rows],
    }


def item_detail_statements(*, project: Project, number: int) -> list[sql.Statement]:
    """The statements :func:`item_detail` runs: the item, its dependencies, its newest reports and
    comments."""
    at = [project.pk, number]
    holds, held_at = held_sql("c")
    return [
        (
            "SELECT i.id, i.kind, i.title, i.state, i.version, ep.key, e.number, mp.key, m.number,"  # noqa: S608 - fixed SQL; values are parameters
            " i.description, i.acceptance_criteria, i.policy, i.priority, i.labels,"
            " c.id, u.username, c.status, c.created_at, c.renewed_at, c.expires_at, c.ended_at, c.end_reason"
            " FROM tracker_item i"
            " LEFT JOIN tracker_item e ON e.id = i.epic_id"
            " LEFT JOIN tracker_project ep ON ep.id = e.project_id"
            " LEFT JOIN tracker_item m ON m.id = i.milestone_id"
            " LEFT JOIN tracker_project mp ON mp.id = m.project_id"
            f" LEFT JOIN tracker_claim c ON c.item_id = i.id AND {holds}"
            " LEFT JOIN auth_user u ON u.id = c.holder_id"
            " WHERE i.project_id = %s AND i.number = %s",
            [*held_at, *at],
        ),
        (
            # Each dependency with the item at its other end, and whether this item blocks it.
            f"WITH it AS {_ITEM_ID}"  # noqa: S608 - fixed SQL; values are parameters
            " SELECT d.blocker_id = it.id, p.key, o.number, o.title, o.state"
            " FROM it JOIN tracker_dependency d ON d.blocked_id = it.id OR d.blocker_id = it.id"
            " JOIN tracker_item o ON o.id = CASE WHEN d.blocked_id = it.id THEN d.blocker_id"
            " ELSE d.blocked_id END"
            " JOIN tracker_project p ON p.id = o.project_id ORDER BY o.number, o.id",
            at,
        ),
        (
            "SELECT r.id, r.claim_id, u.username, r.kind, r.summary, r.links, r.details, r.created_at"  # noqa: S608
            " FROM tracker_report r JOIN auth_user u ON u.id = r.author_id"
            f" WHERE r.item_id = {_ITEM_ID} ORDER BY r.created_at DESC, r.id DESC LIMIT %s",
            [*at, REPORTS_SHOWN],
        ),
        (
            "SELECT c.id, u.username, c.body, c.created_at"  # noqa: S608 - fixed SQL; values are parameters
            " FROM tracker_comment c JOIN auth_user u ON u.id = c.author_id"
            f" WHERE c.item_id = {_ITEM_ID} ORDER BY c.created_at DESC, c.id DESC LIMIT %s",
            [*at, COMMENTS_SHOWN],
        ),
    ]


def _dependencies(rows: list[sql.Row]) -> tuple[list[JsonObject], list[JsonObject]]:
    """The items blocking the item and those it blocks, each as a dependency names it, by number."""
    blocked_by: list[JsonObject] = []
    blocks: list[JsonObject] = []
    for blocks_it, other_key, number, title, state in rows:
        linked = {"key": f"{other_key}-{number}", "title": title, "state": state}
        (blocks if blocks_it else blocked_by).append(linked)
    return blocked_by, blocks


def _claim(key: str, title: str, columns: sql.Row) -> JsonObject | None:
    """The claim that holds the item, read beside it, as ``ClaimSerializer`` shows it."""
    claim_id, holder, status, created, renewed, expires, ended, end_reason = columns
    if claim_id is None:
        return None
    return {
        "id": claim_id,
        "item": key,
        "item_title": title,
        "holder": holder,
        "status": status,
        "created_at": _datetime(created),
        "renewed_at": _datetime(renewed),
        "expires_at": _datetime(expires),
        "ended_at": _datetime(ended),
        "end_reason": end_reason,
    }


def _report(key: str, row: sql.Row) -> JsonObject:
    """A report on the item, as ``ReportSerializer`` shows it."""
    report_id, claim_id, author, kind, summary, links, details, created = row
    return {
        "id": report_id,
        "claim": claim_id,
        "item": key,
        "author": author,
        "kind": kind,
        "summary": summary,
        "links": sql.json_out(links),
        "details": sql.json_out(details),
        "created_at": _datetime(created),
    }


def _comment(row: sql.Row) -> JsonObject:
    """A comment on the item: who wrote it, when, and its Markdown as written (a person's words)."""
    comment_id, author, body, created = row
    return {"id": comment_id, "author": author, "created_at": _datetime(created), "body": body}


def _datetime(value: Any) -> str | None:
    moment = sql.datetime_out(value)
    return None if moment is None else _DATETIME.to_representation(moment)
