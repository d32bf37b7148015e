"""Search over an organization's knowledge base, and knowledge entries as search documents.

Entries are organization-wide documents: whoever reads knowledge in one of
the organization's projects reads them all (:func:`knowledge.selectors.knowledge_visible`).
"""

from __future__ import annotations

from knowledge.models import KnowledgeEntry
from tracker.search import KNOWLEDGE, SearchHit, SearchScope, search
from tracker.search.indexing import SearchSource
from tracker.search.types import DocumentSpec


def knowledge_search(
    *, organization_id: int, query: str, kind: str | None = None, limit: int = 10
) -> list[SearchHit]:
    scope = SearchScope(
        organization_id=organization_id,
        kinds=frozenset({KNOWLEDGE}),
        subkinds=frozenset({kind}) if kind else frozenset(),
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


SOURCE = SearchSource(
    kind=KNOWLEDGE,
    load=knowledge_documents,
    ids_of_organization=lambda org: list(
        KnowledgeEntry.objects.filter(organization_id=org).order_by("pk").values_list("pk", flat=True)
    ),
)
