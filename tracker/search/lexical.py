"""Lexical ranking: the database's full-text search, PostgreSQL's or SQLite's, over one scope.

Both take the query in web-search syntax: every word must match. (Falling back
to documents that match only some words was tried: on the relevance set it
only added noise to what the semantic ranking finds for questions in plain
words.)
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from tracker.search import lexical_postgres, lexical_sqlite
from tracker.search.query import ParsedQuery
from tracker.search.types import KNOWLEDGE, SKILL, SearchScope


def _in(column: str, values: frozenset[str], params: list[Any]) -> str:
    params.extend(sorted(values))
    return f"{column} IN ({', '.join(['%s'] * len(values))})"


def scope_sql(scope: SearchScope) -> tuple[str, list[Any]]:
    """The WHERE conditions of ``scope`` over the documents aliased ``d``.

    The same test as :meth:`tracker.search.store.CachedDocument.in_scope`.
    """
    params: list[Any] = [scope.organization_id]
    conditions = ["d.organization_id = %s", "NOT d.deleted", _in("d.kind", scope.kinds, params)]
    if scope.project_id is None:
        conditions.append("d.project_id IS NULL")
    else:
        conditions.append("(d.project_id IS NULL OR d.project_id = %s)")
        params.append(scope.project_id)
    if scope.subkinds:
        params.append(SKILL)
        conditions.append(f"(d.kind = %s OR {_in('d.subkind', scope.subkinds, params)})")
    if scope.states:
        conditions.append(_in("d.state", scope.states, params))
    if scope.hidden_knowledge:
        params.append(KNOWLEDGE)
        conditions.append(f"NOT (d.kind = %s AND {_in('d.key', scope.hidden_knowledge, params)})")
    return " AND ".join(conditions), params


def lexical_rank(*, scope: SearchScope, query: ParsedQuery, limit: int) -> list[int]:
    """Ids of the documents in ``scope`` that match ``query``, best first."""
    if not query.groups or not scope.kinds:
        return []
    engine = lexical_postgres if connection.vendor == "postgresql" else lexical_sqlite
    where, params = scope_sql(scope)
    return engine.rank(where=where, params=params, query=query, limit=limit)
