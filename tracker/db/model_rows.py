"""Model rows without the query compiler: values prepared and converted by the fields themselves,
inserted, updated and loaded in the hand-written SQL of the hot path (``sql.py``;
docs/architecture.md#the-hot-path-in-sql)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Field, Model

from tracker.db.sql import (
    NO_FLUSH,
    Row,
    Statement,
    batch_ending,
    execute,
    outermost,
    pipelined,
    placeholders,
    queued,
    row,
    rows,
    send,
    vendor,
    write,
)

M = TypeVar("M", bound=Model)
Converter = Callable[[Any, Any, Any], Any]


def field(model: type[Model], name: str) -> Field[Any, Any]:
    found = model._meta.get_field(name)
    assert isinstance(found, Field), f"{model.__name__}.{name} is a concrete field"
    return found


def prep(model: type[Model], name: str, value: Any) -> Any:
    """``value`` as a parameter compared with the column of ``model.name``, prepared as the ORM
    prepares a lookup's value (a UUID is hex text on SQLite, JSON is ``Jsonb`` on PostgreSQL)."""
    return field(model, name).get_db_prep_value(value, connection, prepared=False)


def quoted(name: str) -> str:
    return _quoted(name, vendor())


@functools.cache
def _quoted(name: str, vendor: str) -> str:
    return str(connection.ops.quote_name(name))


def table(model: type[Model]) -> str:
    return quoted(model._meta.db_table)


def columns(model: type[Model], alias: str | None = None) -> str:
    """Every concrete column of ``model``, in field order, for :func:`load`."""
    return _columns(model, alias, vendor())


@functools.cache
def _columns(model: type[Model], alias: str | None, vendor: str) -> str:
    prefix = f"{quoted(alias or model._meta.db_table)}."
    return ", ".join(prefix + quoted(f.column) for f in model._meta.concrete_fields)


@functools.cache
def _converters(model: type[Model], vendor: str) -> list[tuple[str, Any, list[Converter]]]:
    """Per concrete field: its attribute and the converters the ORM applies to what the
    database returns for it (``from_db_value``, the backend's own)."""
    result = []
    for f in model._meta.concrete_fields:
        col = f.get_col(model._meta.db_table)
        steps = connection.ops.get_db_converters(col) + f.get_db_converters(connection)  # type: ignore[attr-defined]
        result.append((f.attname, col, steps))
    return result


def load(model: type[M], values: Sequence[Any]) -> M:
    """A ``model`` instance from the columns :func:`columns` selected, as the ORM would load it."""
    converters = _converters(model, vendor())
    names, converted = [], []
    for (attname, col, steps), raw in zip(converters, values, strict=True):
        value = raw
        for convert in steps:
            value = convert(value, col, connection)
        names.append(attname)
        converted.append(value)
    return model.from_db(connection.alias, names, converted)


@functools.cache
def _insert_into(model: type[Model], vendor: str) -> tuple[list[Field[Any, Any]], str, str]:
    """The fields an INSERT of ``model`` writes, its statement's head (up to the rows), and one
    row's placeholders."""
    fields = [f for f in model._meta.concrete_fields if f is not model._meta.auto_field]
    names = ", ".join(quoted(f.column) for f in fields)
    head = f"INSERT INTO {table(model)} ({names}) "
    return fields, head, f"({placeholders(len(fields))})"


def _insert_values(fields: Sequence[Field[Any, Any]], obj: Model) -> list[Any]:
    """``obj``'s values for an INSERT, every field prepared as ``bulk_create`` prepares it
    (defaults, ``auto_now_add``)."""
    return [f.get_db_prep_save(f.pre_save(obj, add=True), connection) for f in fields]


def insert(objs: Sequence[Model]) -> None:
    """INSERT ``objs`` (of one model, with database-made ids) in one statement, every field
    prepared as ``bulk_create`` prepares it (defaults, ``auto_now_add``); ids are not read back."""
    fields, head, row_sql = _insert_into(type(objs[0]), vendor())
    params = [value for obj in objs for value in _insert_values(fields, obj)]
    write(head + "VALUES " + ", ".join([row_sql] * len(objs)), params)


def insert_returning(objs: Sequence[Model]) -> None:
    """:func:`insert`, now (never queued: it answers), with the ids the database made set on
    ``objs`` as ``bulk_create`` sets them (``RETURNING``, which both databases have)."""
    model = type(objs[0])
    fields, head, row_sql = _insert_into(model, vendor())
    params = [value for obj in objs for value in _insert_values(fields, obj)]
    key = quoted(model._meta.pk.column)
    made = rows(f"{head}VALUES {', '.join([row_sql] * len(objs))} RETURNING {key}", params)
    for obj, (pk,) in zip(objs, made, strict=True):
        obj.pk = pk
        obj._state.adding = False
        obj._state.db = connection.alias


def update(model: type[Model], values: Mapping[str, Any], where: str, params: Sequence[Any]) -> int:
    """UPDATE ``model``'s rows that ``where`` (SQL over its columns) selects, setting the fields
    of ``values`` prepared as the ORM prepares them; the number of rows changed."""
    return execute(*_update(model, values, where, params))


def update_returning(
    model: type[Model],
    values: Mapping[str, Any],
    where: str,
    params: Sequence[Any],
    *,
    pk: Any,
    returning: str,
) -> Row | None:
    """:func:`update` of the row ``pk`` (``where`` must select it alone), and the ``returning``
    expressions (SQL over its columns, ``table.column`` in subqueries) as the update left them;
    None if nothing changed. PostgreSQL gives them in the update's own round trip (RETURNING);
    SQLite, in the process, reads them after it."""
    statement, prepared = _update(model, values, where, params)
    if vendor() == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"{statement} RETURNING {returning}", prepared)
            found: Row | None = cursor.fetchone()
            return found
    if not execute(statement, prepared):
        return None
    key = quoted(model._meta.pk.column)
    return row(f"SELECT {returning} FROM {table(model)} WHERE {key} = %s", [pk])  # noqa: S608 - the caller's SQL


def update_inserting(
    model: type[Model],
    values: Mapping[str, Any],
    where: str,
    params: Sequence[Any],
    *,
    returning: Mapping[str, str],
    inserting: Sequence[tuple[Model, str]],
    no_flush: bool = False,
) -> Row | None:
    """PostgreSQL: :func:`update_returning` of one row and, in the same statement, an INSERT of
    each object of ``inserting`` made only if the update changed its row and the object's
    condition holds (SQL over the names of ``returning``, "" for none). The returned row (its
    values in the order of ``returning``), None if nothing changed: then nothing was inserted.
    One statement (data-modifying WITH clauses, which SQLite lacks) where there were an update
    and the inserts after it; within :func:`batched` it is the batch's last, and goes with the
    COMMIT of a batch that ends its transaction. ``no_flush``: that commit does not wait for the
    disk (``tracker.db.sql.NO_FLUSH``)."""
    assert vendor() == "postgresql", "SQLite has no INSERT or UPDATE in WITH clauses"
    statement, all_params = _update(model, values, where, params)
    names = ", ".join(f"{expr} AS {name}" for name, expr in returning.items())
    clauses = [f"moved AS ({statement} RETURNING {names})"]
    # The WITH clauses run in no set order: rows of one model go in one of them, in order.
    groups: list[tuple[type[Model], str, list[Model]]] = []
    for obj, condition in inserting:
        if groups and groups[-1][0] is type(obj) and groups[-1][1] == condition:
            groups[-1][2].append(obj)
        else:
            groups.append((type(obj), condition, [obj]))
    for index, (kind, condition, objs) in enumerate(groups):
        fields, head, _ = _insert_into(kind, vendor())
        when = f" WHERE {condition}" if condition else ""
        one = f"SELECT {_typed_row(kind)} FROM moved{when}"  # noqa: S608 - the caller's SQL
        clauses.append(f"inserted_{index} AS ({head}{' UNION ALL '.join([one] * len(objs))})")
        all_params.extend(value for obj in objs for value in _insert_values(fields, obj))
    sent = f"WITH {', '.join(clauses)} SELECT {', '.join(returning)} FROM moved"  # noqa: S608 - the caller's SQL
    return _last_row(sent, all_params, no_flush=no_flush)


@functools.cache
def _typed_row(model: type[Model]) -> str:
    """One row's placeholders for an INSERT of ``model`` from a SELECT, each cast to its column's
    type: an untyped NULL in a UNION would be text."""
    fields, _, _ = _insert_into(model, "postgresql")
    return ", ".join(f"%s::{f.cast_db_type(connection)}" for f in fields)  # type: ignore[attr-defined]


def _last_row(sql: str, params: Sequence[Any], *, no_flush: bool = False) -> Row | None:
    """The first row of ``sql``, the last statement of the batch: with the COMMIT in the same
    round trip when the batch ends an outermost transaction (:func:`batched`). Prepared, in one
    pipeline with its transaction's BEGIN and COMMIT, when no write waits to go with it: parsing
    and planning a step's save (several kilobytes of rows) cost PostgreSQL three times what
    running it does. ``no_flush``: the transaction's commit does not wait for the disk."""
    ending = batch_ending.get() and outermost()
    if not queued.get():
        (found_rows,) = pipelined([(sql, params)], commit=ending, no_flush=no_flush)
        return found_rows[0] if found_rows else None
    statements: list[Statement] = [(NO_FLUSH, ())] if no_flush else []
    statements.append((sql, params))
    if ending:
        statements.append(("COMMIT", ()))
    with connection.cursor() as cursor:
        send(cursor, statements, skip=1 if no_flush else 0)  # on ``sql``'s result
        found: Row | None = cursor.fetchone()
        return found


def update_later(model: type[Model], values: Mapping[str, Any], where: str, params: Sequence[Any]) -> None:
    """:func:`update` when nobody reads how many rows it changed: within :func:`batched`, sent
    with the next statement."""
    write(*_update(model, values, where, params))


_AS_IT_WAS = object()


class Case:
    """An updated column's value that depends on the row: ``then`` where ``when`` (SQL over the
    row's columns, with ``params``) holds, else ``otherwise`` (by default the column as it was)."""

    def __init__(self, when: str, params: Sequence[Any], then: Any, otherwise: Any = _AS_IT_WAS) -> None:
        self.when, self.params, self.then, self.otherwise = when, list(params), then, otherwise


def _update(
    model: type[Model], values: Mapping[str, Any], where: str, params: Sequence[Any]
) -> tuple[str, list[Any]]:
    sets, prepared = [], []
    for name, value in values.items():
        f = field(model, name)
        column = quoted(f.column)
        if isinstance(value, Case):
            then = f.get_db_prep_save(value.then, connection)
            if value.otherwise is _AS_IT_WAS:
                sets.append(f"{column} = CASE WHEN {value.when} THEN %s ELSE {column} END")
                prepared.extend([*value.params, then])
            else:
                sets.append(f"{column} = CASE WHEN {value.when} THEN %s ELSE %s END")
                prepared.extend([*value.params, then, f.get_db_prep_save(value.otherwise, connection)])
            continue
        sets.append(f"{column} = %s")
        prepared.append(f.get_db_prep_save(value, connection))
    statement = f"UPDATE {table(model)} SET {', '.join(sets)} WHERE {where}"  # noqa: S608 - the caller's SQL
    return statement, [*prepared, *params]
