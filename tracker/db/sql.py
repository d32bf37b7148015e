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

import dataclasses
import datetime
import functools
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final, TypeVar

import psycopg
from django.db import connection
from django.db.models import Model
from django.utils import timezone
from django.utils.dateparse import parse_datetime

Row = tuple[Any, ...]
M = TypeVar("M", bound=Model)
Converter = Callable[[Any, Any, Any], Any]


@functools.cache
def vendor() -> str:
    """The database's vendor: one for the process, asked many times a turn (through the ORM's
    connection proxy, a few microseconds each time)."""
    return connection.vendor


class _Now:
    def __repr__(self) -> str:
        return "sql.NOW"


NOW = _Now()
"""A parameter that stands for the time (``timezone.now()``) when its statement is sent: the same
statement then has the same parameters whenever it is built, so one read ahead
(:func:`reading_ahead`) is the one its code asks for, and each compares with the moment it reads."""


def _bound(params: Sequence[Any]) -> Sequence[Any]:
    """``params`` with :data:`NOW` replaced by the time, as the ORM sends a date-time."""
    if not any(param is NOW for param in params):
        return params
    now = datetime_in(timezone.now())
    return [now if param is NOW else param for param in params]


def rows(sql: str, params: Sequence[Any] = ()) -> list[Row]:
    """Every row of ``sql``, a statement prepared once per connection on PostgreSQL."""
    if (found := _read_ahead(sql, params)) is not None:
        return found
    return _rows_sent(sql, params)


def _rows_sent(sql: str, params: Sequence[Any]) -> list[Row]:
    with _reading() as cursor:
        cursor.execute(sql, _bound(params))
        return cursor.fetchall()


def row(sql: str, params: Sequence[Any] = ()) -> Row | None:
    """The first row of ``sql``, if any (prepared as :func:`rows` prepares it)."""
    if (ahead := _read_ahead(sql, params)) is not None:
        return ahead[0] if ahead else None
    with _reading() as cursor:
        cursor.execute(sql, _bound(params))
        found: Row | None = cursor.fetchone()
        return found


class _PreparedCursor(psycopg.Cursor[Any]):
    """A cursor binding its parameters on the server and preparing every statement it runs: the
    connection keeps the statement, and PostgreSQL its plan, so the next run of the same SQL skips
    the parsing and planning (a third of a millisecond to one for the read tools' joins, where the
    whole statement then takes about two tenths). One statement per execute, as prepared
    statements are; the multi-statement sends below keep the connection's client-side cursor."""

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None
    ) -> Any:
        return super().execute(query, params, prepare=True, binary=binary)

    def _send_query_prepared(self, name: bytes, pgq: Any, *, binary: bool | None = None) -> None:
        self._query = pgq  # as a statement sent unprepared keeps it: Django logs the SQL it ran from it
        super()._send_query_prepared(name, pgq, binary=binary)

    def _convert_query(self, query: Any, params: Any = None) -> Any:
        """As psycopg converts a query (its ``%s`` placeholders into ``$1``…), but kept for every
        statement this cursor runs: psycopg keeps only those of at most 50 parameters and 4 KB, and
        a step's save (``update_inserting``), with more, was split again at every call (0.3-0.5 ms
        a turn). Its statements come from a few shapes, so a small cache holds them."""
        if params is None or not isinstance(query, str | bytes):
            return super()._convert_query(query, params)
        pgq = self._query_cls(self._tx)
        encoded = pgq._ensure_bytes(query)
        pgq.query, pgq._want_formats, pgq._order, pgq._parts = _converted(encoded, self._tx.encoding)
        pgq.dump(params)
        return pgq


# psycopg's own conversion, uncached, under a cache of this module's (the statements prepared).
_converted = functools.lru_cache(maxsize=256)(psycopg._queries._query2pg_nocache)


def _reading() -> Any:
    """A cursor for one read: prepared on PostgreSQL unless writes wait to go with it (then the
    connection's own, which takes several statements at once), the connection's own on SQLite.
    Both are wrapped as ``connection.cursor()`` wraps its cursors (execute wrappers, the queries
    logged in tests, database errors as Django's)."""
    if vendor() != "postgresql" or queued.get():
        return connection.cursor()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        return connection._prepare_cursor(_PreparedCursor(connection.connection))  # type: ignore[attr-defined]


def execute(sql: str, params: Sequence[Any] = ()) -> int:
    """Run ``sql``; the number of rows it changed."""
    with connection.cursor() as cursor:
        cursor.execute(sql, _bound(params))
        return int(cursor.rowcount)


def placeholders(count: int) -> str:
    """``%s, %s, …``: ``count`` placeholders, for ``IN (…)`` and multi-row ``VALUES``."""
    return ", ".join(["%s"] * count)


def for_update() -> str:
    """The row-lock clause where the database has one (SQLite's write transactions lock it all):
    ``FOR NO KEY UPDATE``, as ``tracker.db.locks.locked`` takes it (docs/architecture.md#row-locks)."""
    if connection.features.has_select_for_no_key_update:
        return " FOR NO KEY UPDATE"
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


# --- writes nobody reads, sent with the next statement: one round trip where there were several

Statement = tuple[str, Sequence[Any]]
queued: ContextVar[list[Statement] | None] = ContextVar("ballet_sql_queued", default=None)
# Whether the batch ends the transaction: batched(ends_transaction=True).
batch_ending: ContextVar[bool] = ContextVar("ballet_sql_ending", default=False)


def write(sql: str, params: Sequence[Any] = ()) -> None:
    """Run ``sql``, whose result nobody reads (a write, or a row lock taken for what follows): at
    once, or within :func:`batched` with the next statement the connection runs (the ORM's too),
    or when the batch ends."""
    queue = queued.get()
    if queue is None:
        execute(sql, params)
    else:
        queue.append((sql, params))


@contextmanager
def batched(*, ends_transaction: bool = False) -> Iterator[None]:
    """Within: what :func:`write` (so :func:`insert`, :func:`update_later`) writes waits, and goes
    to PostgreSQL in one round trip with the next statement the connection runs, in order; what
    still waits at the end goes then. The caller's transaction holds them all: a failing one
    fails the statement it went with. PostgreSQL takes several statements in one execute with the
    client-side binding Django uses; SQLite, in the process, pays no round trip and runs each at
    once. Nest it inside the transaction, never around one: the commit must follow the flush.

    ``ends_transaction``: the batch is the whole of an outermost transaction (``transaction.atomic``
    right around it, nothing after it), so what waits at its end goes with the COMMIT, in the
    same round trip; the atomic block's own commit then finds nothing left to commit. Within an
    outer transaction or a savepoint (a test's, a caller's) the batch ends as any other."""
    if vendor() != "postgresql" or queued.get() is not None:
        yield
        return
    queue: list[Statement] = []
    token, ending = queued.set(queue), batch_ending.set(ends_transaction)
    try:
        with connection.execute_wrapper(_with_queued(queue)):
            yield
            if queue:
                statements = list(queue)
                queue.clear()
                if ends_transaction and outermost():
                    statements.append(("COMMIT", ()))
                with connection.cursor() as cursor:
                    send(cursor, statements)
    finally:
        queued.reset(token)
        batch_ending.reset(ending)


def outermost() -> bool:
    """Is the connection in one atomic block, no savepoint, nothing marked for rollback?"""
    return (
        connection.in_atomic_block
        and len(connection.atomic_blocks) == 1
        and not connection.savepoint_ids
        and not connection.needs_rollback
    )


def _with_queued(queue: list[Statement]) -> Callable[..., Any]:
    """An execute wrapper sending what waits in ``queue`` before the statement at hand, in the
    same execute, and leaving the cursor on the statement at hand's (first) result. The first
    statement of a transaction also takes its BEGIN along (:func:`_begun_by_us`): as text before
    it on the connection's own cursor, in one pipeline with it on a prepared one."""

    def wrapper(
        execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
    ) -> Any:
        opening = not many and _opening()
        statements = [("BEGIN", ()), *queue] if opening else list(queue)
        queue.clear()
        if not statements:
            return execute(sql, params, many, context)
        with _begun_by_us(opening):
            if isinstance(context["cursor"].cursor, _PreparedCursor):  # only when nothing waited
                with connection.connection.pipeline():
                    connection.connection.execute("BEGIN")
                    return execute(sql, params, many, context)
            if many or params is None:  # its SQL is not to be interpolated: what waits goes first, alone
                send(context["cursor"], statements, execute, context)
                return execute(sql, params, many, context)
            return send(
                context["cursor"], [*statements, (sql, params)], execute, context, skip=len(statements)
            )

    return wrapper


def _opening() -> bool:
    """Is this the first statement of the connection's transaction? Django opened it (an atomic
    block) and psycopg would send its BEGIN now, alone, a round trip of its own."""
    raw = connection.connection
    return (
        connection.in_atomic_block
        and raw is not None
        and not raw.autocommit
        and raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    )


@contextmanager
def _begun_by_us(opening: bool) -> Iterator[None]:
    """While the statement that opens a transaction goes with its BEGIN, psycopg is kept from
    sending one of its own (it does whenever it finds no transaction open, before the statement
    and alone); the server then says a transaction is open, and psycopg goes on from there as if
    it had opened it."""
    if not opening:
        yield
        return
    raw = connection.connection
    raw._autocommit = True  # psycopg's own flag: its public setter refuses to change it in a transaction
    try:
        yield
    finally:
        raw._autocommit = False


def send(
    cursor: Any,
    statements: Sequence[Statement],
    execute: Callable[..., Any] | None = None,
    context: dict[str, Any] | None = None,
    skip: int | None = None,
) -> Any:
    """Run ``statements`` as one execute; leave the cursor past ``skip`` results (all but the last
    when None)."""
    sql = "; ".join(s for s, _ in statements)
    params = _bound([p for _, ps in statements for p in ps])
    result = cursor.execute(sql, params) if execute is None else execute(sql, params, False, context)
    for _ in range(len(statements) - 1 if skip is None else skip):
        cursor.nextset()
    return result


def result_sets(statements: Sequence[Statement]) -> list[list[Row]]:
    """Every row of each of ``statements``, in order: in one round trip on PostgreSQL (several
    statements in one execute, their results read one after another), each at once on SQLite."""
    if (found := _all_read_ahead(statements)) is not None:
        return found
    ahead = _ahead.get()
    if ahead is None or not ahead.pending:
        return _result_sets_sent(statements)
    pending, ahead.pending = ahead.pending, []
    found = _result_sets_sent([*statements, *pending])
    ahead.keep(pending, found[len(statements) :])
    return found[: len(statements)]


def _result_sets_sent(statements: Sequence[Statement]) -> list[list[Row]]:
    if vendor() != "postgresql":
        return [_rows_sent(sql, params) for sql, params in statements]
    if queued.get():  # the writes waiting go first, in the same execute
        with connection.cursor() as cursor:
            send(cursor, statements, skip=0)
            found = [cursor.fetchall()]
            for _ in statements[1:]:
                cursor.nextset()
                found.append(cursor.fetchall())
        return found
    return pipelined(statements)


# A transaction that may be lost to a crash of the database's server, never half: its commit
# answers before the write-ahead log reaches the disk (docs/architecture.md#commits-that-need-no-flush).
NO_FLUSH: Final = "SET LOCAL synchronous_commit TO OFF"


def pipelined(
    statements: Sequence[Statement], *, commit: bool = False, no_flush: bool = False
) -> list[list[Row]]:
    """Every row of each of ``statements``, prepared one by one in psycopg's pipeline mode: sent
    together, read together, with the transaction's BEGIN when they open it (psycopg would sync
    the pipeline after its own), and with ``commit`` its COMMIT after them; ``no_flush``: the
    transaction's commit does not wait for the disk (:data:`NO_FLUSH`)."""
    cursors = [_reading() for _ in statements]
    opening = _opening()
    raw = connection.connection
    try:
        with connection.wrap_database_errors, _begun_by_us(opening):
            with raw.pipeline():
                if opening:
                    raw.execute("BEGIN")
                if no_flush:
                    raw.execute(NO_FLUSH)
                for cursor, (sql, params) in zip(cursors, statements, strict=True):
                    cursor.execute(sql, _bound(params))
                if commit:
                    raw.execute("COMMIT")
            return [cursor.fetchall() for cursor in cursors]
    finally:
        for cursor in cursors:
            cursor.close()


# --- reads sent before the code that makes them: one round trip for a round of tool calls

_Key = tuple[str, tuple[Any, ...]]


@dataclasses.dataclass
class _Ahead:
    # What was read, waiting for its askers; what goes with the next read sent.
    kept: dict[_Key, list[list[Row]]] = dataclasses.field(default_factory=dict)
    pending: list[Statement] = dataclasses.field(default_factory=list)

    def keep(self, statements: Sequence[Statement], found: Sequence[list[Row]]) -> None:
        for (sql, params), rows_ in zip(statements, found, strict=True):
            if (key := _key(sql, params)) is not None:
                self.kept.setdefault(key, []).append(rows_)


_ahead: ContextVar[_Ahead | None] = ContextVar("ballet_sql_ahead", default=None)


@contextmanager
def reading_ahead(statements: Sequence[Statement], *, with_next: bool = False) -> Iterator[None]:
    """Read ``statements`` now, all in one round trip (:func:`result_sets`), or with ``with_next``
    in the round trip of the next read sent within; within, a :func:`rows`, :func:`row` or
    :func:`result_sets` that asks for one of them, the same SQL with the same parameters, gets
    what was read instead of sending it again, once. For reads the caller knows its code is about
    to make, with no write of its own before them: the answer is what the database held a moment
    before the code asked (docs/architecture.md#the-hot-path-in-sql). Within another, it stands
    alone: what the outer one read waits until it ends."""
    if not statements:
        yield
        return
    ahead = _Ahead()
    if with_next:
        ahead.pending = list(statements)
    else:
        ahead.keep(statements, result_sets(statements))
    token = _ahead.set(ahead)
    try:
        yield
    finally:
        _ahead.reset(token)


def _key(sql: str, params: Sequence[Any]) -> _Key | None:
    key = (sql, tuple(params))
    try:
        hash(key)
    except TypeError:  # a parameter that is a list: asked for again, it is read again
        return None
    return key


def _read_ahead(sql: str, params: Sequence[Any]) -> list[Row] | None:
    """The rows of ``sql`` read ahead (:func:`reading_ahead`), taken; None if none wait. A read
    that is not waits for nothing that goes with the next read: it is that read."""
    ahead = _ahead.get()
    if ahead is None:
        return None
    if (key := _key(sql, params)) is not None and (waiting := ahead.kept.get(key)):
        return waiting.pop(0)
    if ahead.pending:
        return result_sets([(sql, params)])[0]
    return None


def _all_read_ahead(statements: Sequence[Statement]) -> list[list[Row]] | None:
    """The rows of each of ``statements`` if every one was read ahead, taken; else None, nothing taken."""
    ahead = _ahead.get()
    if ahead is None or not ahead.kept:
        return None
    keys = [_key(sql, params) for sql, params in statements]
    wanted: dict[_Key, int] = {}
    for key in keys:
        if key is None:
            return None
        wanted[key] = wanted.get(key, 0) + 1
    if any(len(ahead.kept.get(key, ())) < count for key, count in wanted.items()):
        return None
    return [ahead.kept[key].pop(0) for key in keys if key is not None]
