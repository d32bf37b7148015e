"""Reads of the knowledge base, limited to what the caller may read."""

from __future__ import annotations

from typing import Any

from django.db.models import Case, IntegerField, QuerySet, Value, When

from knowledge.models import KnowledgeEntry
from knowledge.search import knowledge_search
from tracker.errors import NotFoundError
from tracker.models import Project
from tracker.permissions import KNOWLEDGE_READ, AnyUser, project_ids_with


def knowledge_visible(*, user: AnyUser | None) -> QuerySet[KnowledgeEntry]:
    """Entries of every organization in which ``user`` reads knowledge in some project."""
    project_ids = project_ids_with(user, KNOWLEDGE_READ)
    org_ids = Project.objects.filter(pk__in=project_ids).values("organization_id")
    return KnowledgeEntry.objects.filter(organization_id__in=org_ids).select_related("author", "last_editor")


def knowledge_list(
    *,
    user: AnyUser | None,
    kind: str | None = None,
    project: Project | None = None,
    q: str | None = None,
    organization_id: int | None = None,
) -> QuerySet[KnowledgeEntry]:
    qs = knowledge_visible(user=user).prefetch_related("projects", "items__project")
    if organization_id is not None:
        qs = qs.filter(organization_id=organization_id)
    if kind:
        qs = qs.filter(kind=kind)
    if project is not None:
        qs = qs.filter(projects=project)
    if q:
        return _ranked(qs.distinct(), _search(user, q, kind=kind, organization_id=organization_id))
    return qs.distinct().order_by("-updated_at", "-pk")


SEARCH_LIMIT = 100


def _search(user: AnyUser | None, q: str, *, kind: str | None, organization_id: int | None) -> list[int]:
    """Ids of the entries that best answer ``q`` in the organizations ``user`` reads knowledge of."""
    if organization_id is not None:
        org_ids = [organization_id]
    else:
        projects = Project.objects.filter(pk__in=project_ids_with(user, KNOWLEDGE_READ))
        org_ids = sorted(set(projects.values_list("organization_id", flat=True)))
    hits = [
        hit
        for org_id in org_ids
        for hit in knowledge_search(organization_id=org_id, query=q, kind=kind, limit=SEARCH_LIMIT)
    ]
    hits.sort(key=lambda hit: -hit.score)
    return [int(hit.key) for hit in hits[:SEARCH_LIMIT]]


def _ranked(qs: QuerySet[KnowledgeEntry], ids: list[int]) -> QuerySet[KnowledgeEntry]:
    """``qs`` limited to ``ids``, in their order (the search's ranking)."""
    if not ids:
        return qs.none()
    rank = Case(*(When(pk=pk, then=Value(i)) for i, pk in enumerate(ids)), output_field=IntegerField())
    return qs.filter(pk__in=ids).annotate(search_rank=rank).order_by("search_rank")


def knowledge_get(*, user: AnyUser | None, entry_id: int) -> KnowledgeEntry:
    if not 0 < entry_id < 2**63:  # out of the column's range: cannot exist, and must not reach the database
        raise NotFoundError(f"Knowledge entry {entry_id} not found.")
    try:
        return (
            knowledge_visible(user=user)
            .prefetch_related("projects", "items__project", "revisions__editor")
            .get(pk=entry_id)
        )
    except KnowledgeEntry.DoesNotExist as exc:
        raise NotFoundError(f"Knowledge entry {entry_id} not found.") from exc


def knowledge_snapshot(entry: KnowledgeEntry) -> dict[str, Any]:
    """The entry's current content, as a conflict answer carries it."""
    return {
        "id": entry.pk,
        "kind": entry.kind,
        "title": entry.title,
        "body": entry.body,
        "version": entry.version,
    }
