"""SQLite FTS5 over ``tracker_search_fts`` (migration 0003): rank, and keep the table in step.

The query is rebuilt in FTS5 syntax from the parsed web-search query, every
word quoted so that nothing in it is read as an operator; the porter
tokenizer stems as PostgreSQL's English configuration does. ``bm25`` weighs
the title 2.5 times the body, the ratio of PostgreSQL's A and B weights.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection

from tracker.search.query import ParsedQuery, Term

RANK_SQL = (
    "SELECT d.id FROM tracker_search_fts JOIN tracker_searchdocument d ON d.id = tracker_search_fts.rowid "
    "WHERE tracker_search_fts MATCH %s AND {where} ORDER BY bm25(tracker_search_fts, 2.5, 1.0), d.id LIMIT %s"
)


def _term(term: Term) -> str:
    return '"' + " ".join(word.replace('"', '""') for word in term) + '"'


def fts_query(query: ParsedQuery) -> str:
    groups = [
        "(" + " OR ".join(_term(t) for t in group) + ")" if len(group) > 1 else _term(group[0])
        for group in query.groups
    ]
    expression = " AND ".join(groups)
    for term in query.excluded:
        expression = f"({expression}) NOT {_term(term)}"
    return expression


def rank(*, where: str, params: list[Any], query: ParsedQuery, limit: int) -> list[int]:
    # Only placeholders go into the text (scope_sql); values travel as parameters.
    sql = RANK_SQL.format(where=where)
    with connection.cursor() as cursor:
        cursor.execute(sql, [fts_query(query), *params, limit])
        return [row[0] for row in cursor.fetchall()]


def write(rows: Iterable[tuple[int, str, str]], removed: Iterable[int]) -> None:
    """Replace the FTS rows of documents ``rows`` (id, title, body); drop those of ``removed``."""
    rows = list(rows)
    stale = [(doc_id,) for doc_id in [*removed, *(row[0] for row in rows)]]
    with connection.cursor() as cursor:
        cursor.executemany("DELETE FROM tracker_search_fts WHERE rowid = %s", stale)
        cursor.executemany("INSERT INTO tracker_search_fts (rowid, title, body) VALUES (%s, %s, %s)", rows)


def purge_orphans() -> int:
    """Drop FTS rows whose document is gone (a cascade from a deleted project or organization)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM tracker_search_fts WHERE rowid NOT IN (SELECT id FROM tracker_searchdocument)"
        )
        return cursor.rowcount
