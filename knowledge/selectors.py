"""Reads of the knowledge base, limited to what the caller may read."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from knowledge.models import KnowledgeEntry
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
        for word in q.split()[:10]:
            qs = qs.filter(Q(title__icontains=word) | Q(body__icontains=word))
    return qs.distinct().order_by("-updated_at", "-pk")


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
