"""Search over an organization's knowledge base: the interface the planner and the API call.

Lexical for now; the hybrid search of SPEC § 7 replaces the ranking behind it.
"""

from __future__ import annotations

from django.db.models import Q

from knowledge.models import KnowledgeEntry
from tracker.search import SearchHit, query_words, score, snippet


def knowledge_search(
    *, organization_id: int, query: str, kind: str | None = None, limit: int = 10
) -> list[SearchHit]:
    words = query_words(query)
    if not words:
        return []
    condition = Q()
    for word in words:
        condition |= Q(title__icontains=word) | Q(body__icontains=word)
    rows = KnowledgeEntry.objects.filter(organization_id=organization_id).filter(condition)
    if kind:
        rows = rows.filter(kind=kind)
    hits = [
        SearchHit(
            kind="knowledge",
            key=str(row["pk"]),
            title=str(row["title"]),
            snippet=snippet(str(row["body"]) or str(row["title"]), words),
            score=score(words, str(row["title"]), str(row["body"])),
            state=str(row["kind"]),
        )
        for row in rows.values("pk", "title", "body", "kind")[:200]
    ]
    return sorted(hits, key=lambda h: (-h.score, h.key))[:limit]
