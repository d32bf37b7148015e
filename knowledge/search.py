"""Search over an organization's knowledge base, and knowledge entries as search documents.

Entries are indexed as organization documents; who may read each depends on
its project links (:func:`knowledge.selectors.knowledge_visible`), so a search
names the entries to leave out (:func:`knowledge.selectors.knowledge_find`).
"""

from __future__ import annotations

from collections.abc import Iterable

from knowledge.models import KnowledgeEntry
from tracker.search import KNOWLEDGE, SearchHit, SearchScope, search
from tracker.search.types import DocumentSpec, SearchSource


def knowledge_search(
    *, organization_id: int, query: str, hidden: Iterable[int], kind: str | None = None, limit: int = 10
) -> list[SearchHit]:
    """The organization's entries but ``hidden`` (ids the caller may not read) that best answer ``query``."""
    scope = SearchScope(
        organization_id=organization_id,
        kinds=frozenset({KNOWLEDGE}),
        subkinds=frozenset({kind}) if kind else frozenset(),
        hidden_knowledge=frozenset(str(pk) for pk in hidden),
    )
    return search(scope=scope, query=query, limit=limit)


def knowledge_documents(ids: list[int]) -> list[DocumentSpec]:
    return [
        DocumentSpec(
            kind=KNOWLEDGE,
            object_id=entry.pk,
            organization_id=entry.organization_id,
            project_id=None,
            key=str(entry.pk),
            title=entry.title,
            body=entry.body,
            subkind=entry.kind,
            source_version=entry.version,
        )
        for entry in KnowledgeEntry.objects.filter(pk__in=ids)
    ]


KNOWLEDGE_SOURCE = SearchSource(
    kind=KNOWLEDGE,
    load=knowledge_documents,
    ids_of_organization=lambda org: list(
        KnowledgeEntry.objects.filter(organization_id=org).order_by("pk").values_list("pk", flat=True)
    ),
)
