"""Lexical ranking: the database's full-text search, PostgreSQL's or SQLite's, over one scope.

Both take the query in web-search syntax: every word must match. When that
finds fewer than :data:`RELAX_BELOW` documents, documents matching any of the
words follow, so that a question in plain words still has lexical evidence
for fusion.
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from tracker.search import lexical_postgres, lexical_sqlite
from tracker.search.query import ParsedQuery
from tracker.search.types import SKILL, SearchScope

RELAX_BELOW = 10


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
    return " AND ".join(conditions), params


def lexical_rank(*, scope: SearchScope, query: ParsedQuery, limit: int) -> list[int]:
    """Ids of the documents in ``scope`` that match ``query``, best first."""
    if not query.groups or not scope.kinds:
        return []
    engine = lexical_postgres if connection.vendor == "postgresql" else lexical_sqlite
    where, params = scope_sql(scope)
    ranked = engine.rank(where=where, params=params, query=query, relaxed=False, limit=limit)
    if len(ranked) < RELAX_BELOW and len(query.words) > 1:
        seen = set(ranked)
        relaxed = engine.rank(where=where, params=params, query=query, relaxed=True, limit=limit)
        ranked += [doc_id for doc_id in relaxed if doc_id not in seen][: limit - len(ranked)]
    return ranked
