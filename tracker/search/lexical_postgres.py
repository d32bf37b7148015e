"""PostgreSQL full-text search over the generated, GIN-indexed ``search_vector`` (migration 0003).

``websearch_to_tsquery('english', ...)`` parses the query; ``ts_rank`` with
the default weights counts a title match (A) 2.5 times a body match (B), and
normalization 1 keeps long bodies from winning by length.
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from tracker.search.query import ParsedQuery

RANK_SQL = (
    "SELECT d.id FROM tracker_searchdocument d, websearch_to_tsquery('english', %s) q "
    "WHERE d.search_vector @@ q AND {where} "
    "ORDER BY ts_rank(d.search_vector, q, 1) DESC, d.id LIMIT %s"
)


def rank(*, where: str, params: list[Any], query: ParsedQuery, limit: int) -> list[int]:
    # Only placeholders go into the text (scope_sql); values travel as parameters.
    sql = RANK_SQL.format(where=where)
    with connection.cursor() as cursor:
        cursor.execute(sql, [query.text, *params, limit])
        return [row[0] for row in cursor.fetchall()]
