"""Statements of the turn's hot path, written once in SQL (docs/architecture.md#the-hot-path-in-sql).

On this hardware the ORM spends one to three milliseconds composing a query
that the database answers in under one; a planner turn sends about thirty.
The statements a turn always runs are written here in plain SQL that SQLite
and PostgreSQL both take (``%s`` placeholders, no vendor casts), and read back
with the same conversions the ORM applies: JSON columns come back as text,
SQLite gives date-times as text. Everything else stays on the ORM: a statement
belongs here only when it is on every turn's path and measured to matter
(``bench/turn_overhead.py``). Each has a test against its ORM twin.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

Row = tuple[Any, ...]


def rows(sql: str, params: Sequence[Any] = ()) -> list[Row]:
    """Every row of ``sql``."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def row(sql: str, params: Sequence[Any] = ()) -> Row | None:
    """The first row of ``sql``, if any."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found: Row | None = cursor.fetchone()
        return found


def execute(sql: str, params: Sequence[Any] = ()) -> int:
    """Run ``sql``; the number of rows it changed."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


def placeholders(count: int) -> str:
    """``%s, %s, …``: ``count`` placeholders, for ``IN (…)`` and multi-row ``VALUES``."""
    return ", ".join(["%s"] * count)


def for_update() -> str:
    """The row-lock clause where the database has one (SQLite's write transactions lock it all)."""
    return " FOR UPDATE" if connection.features.has_select_for_update else ""


def json_in(value: Any) -> str:
    """A value for a JSON column, as the ORM writes it."""
    return json.dumps(value)


def json_out(value: Any) -> Any:
    """A JSON column's value as read (text on both databases)."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def datetime_in(value: datetime.datetime) -> Any:
    """A date-time parameter, as the ORM sends it (SQLite stores naive UTC text)."""
    return connection.ops.adapt_datetimefield_value(value)


def datetime_out(value: Any) -> datetime.datetime | None:
    """A date-time column's value as read: aware, in UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_datetime(value)
        assert value is not None, "a date-time column holds a date-time"
    if timezone.is_naive(value):
        value = timezone.make_aware(value, datetime.UTC)
    return value
