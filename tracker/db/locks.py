"""Row locks, taken one way and in one order (docs/architecture.md#row-locks).

Every row lock is ``FOR NO KEY UPDATE`` of the queried table's own rows (:func:`locked`; in SQL,
``tracker.db.sql.for_update``), never of the rows a query joins for reading: a plain
``select_for_update()`` with ``select_related`` would also lock the project, the organization and
the users it reads, and ``FOR UPDATE`` blocks the ``FOR KEY SHARE`` that PostgreSQL's foreign-key
checks take at commit (Django defers them) on every project and item a transaction inserted a row
about. Nothing here changes a key or deletes under a lock, so the weaker lock keeps writers apart
as well.

A transaction that takes several takes them in :data:`ORDER`, items by id; the organization's row
(the activity log's ``seq``, ``activity_record``) comes last.
"""

from __future__ import annotations

from typing import Final, TypeVar

from django.db.models import Model, QuerySet

M = TypeVar("M", bound=Model)

ORDER: Final = ("changeset", "session", "project", "question", "items, by id", "claim", "organization")


def locked(queryset: QuerySet[M]) -> QuerySet[M]:
    """``queryset``'s own rows locked until the transaction ends (``FOR NO KEY UPDATE OF`` its
    table; nothing on SQLite, whose write transactions lock the whole database)."""
    return queryset.select_for_update(of=("self",), no_key=True)
