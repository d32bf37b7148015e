"""Reads of the knowledge base, limited to what the caller may read.

The REST API and the planner tools read through these functions, so which
entries a human may read, and which of their links they see, is defined here once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Case, CharField, Count, Exists, IntegerField, OuterRef, Q, QuerySet, Value, When
from django.db.models.functions import Concat

from knowledge.models import KnowledgeEntry, KnowledgeRevision
from knowledge.search import knowledge_search
from tracker.errors import NotFoundError
from tracker.models import Project
from tracker.search import SearchHit
from tracker.trust.permissions import KNOWLEDGE_READ, Principal, project_ids_with


def knowledge_visible(*, user: Principal | None) -> QuerySet[KnowledgeEntry]:
    """The entries ``user`` may read (docs/domain.md#knowledge): every path to knowledge starts here.

    An entry linked to projects is readable by those who read knowledge in
    every one of them; an entry with no project link, by those who read
    knowledge in some project of its organization.
    """
    readable = project_ids_with(user, KNOWLEDGE_READ)
    org_ids = Project.objects.filter(pk__in=readable).values("organization_id")
    beyond = KnowledgeEntry.projects.through.objects.exclude(project_id__in=readable)
    return (
        KnowledgeEntry.objects.filter(organization_id__in=org_ids)
        .exclude(pk__in=beyond.values("knowledgeentry_id"))
        .select_related("author", "last_editor")
    )


def knowledge_events_visible(*, user: Principal | None) -> Q:
    """Of the activity log's ``knowledge.*`` events, those of the entries ``user`` reads: an event
    carries its entry's title (registered in ``knowledge/apps.py``)."""
    readable = knowledge_visible(user=user).annotate(
        target=Concat(Value("knowledge:"), "pk", output_field=CharField())
    )
    return Q(target__in=readable.values("target"))


def knowledge_hidden_ids(*, user: Principal | None, organization_id: int) -> frozenset[int]:
    """Ids of the organization's entries that ``user`` may not read (the complement of
    :func:`knowledge_visible` in the organization, in one cheap query): those linked to a project
    the user cannot read, and all of them for a user who reads no knowledge in the organization."""
    readable = project_ids_with(user, KNOWLEDGE_READ)
    reads_here = Project.objects.filter(pk__in=readable, organization_id=organization_id)
    beyond = KnowledgeEntry.projects.through.objects.exclude(project_id__in=readable)
    hidden = KnowledgeEntry.objects.filter(organization_id=organization_id).filter(
        ~Exists(reads_here) | Q(pk__in=beyond.values("knowledgeentry_id"))
    )
    return frozenset(hidden.values_list("pk", flat=True))


def knowledge_find(
    *, user: Principal | None, organization_id: int, query: str, kind: str | None = None, limit: int = 10
) -> list[SearchHit]:
    """The entries of the organization that ``user`` may read and that best answer ``query``.

    A caller who reads no knowledge in the organization has every entry hidden: nothing is found.
    """
    hidden = knowledge_hidden_ids(user=user, organization_id=organization_id)
    return knowledge_search(
        organization_id=organization_id, query=query, kind=kind, limit=limit, hidden=hidden
    )


def knowledge_list(
    *,
    user: Principal | None,
    kind: str | None = None,
    project: Project | None = None,
    q: str | None = None,
    organization_id: int | None = None,
) -> QuerySet[KnowledgeEntry]:
    qs = knowledge_visible(user=user)
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


def _search(user: Principal | None, q: str, *, kind: str | None, organization_id: int | None) -> list[int]:
    """Ids of the readable entries that best answer ``q`` in the organizations ``user`` reads knowledge of."""
    if organization_id is not None:
        org_ids = [organization_id]
    else:
        projects = Project.objects.filter(pk__in=project_ids_with(user, KNOWLEDGE_READ))
        org_ids = sorted(set(projects.values_list("organization_id", flat=True)))
    hits = [
        hit
        for org_id in org_ids
        for hit in knowledge_find(user=user, organization_id=org_id, query=q, kind=kind, limit=SEARCH_LIMIT)
    ]
    hits.sort(key=lambda hit: (hit.related, -hit.score))  # every organization's matches first
    return [int(hit.key) for hit in hits[:SEARCH_LIMIT]]


def _ranked(qs: QuerySet[KnowledgeEntry], ids: list[int]) -> QuerySet[KnowledgeEntry]:
    """``qs`` limited to ``ids``, in their order (the search's ranking)."""
    if not ids:
        return qs.none()
    rank = Case(*(When(pk=pk, then=Value(i)) for i, pk in enumerate(ids)), output_field=IntegerField())
    return qs.filter(pk__in=ids).annotate(search_rank=rank).order_by("search_rank")


def knowledge_get(
    *, user: Principal | None, entry_id: int, organization_id: int | None = None
) -> KnowledgeEntry:
    """The entry, if ``user`` may read it (and it is of ``organization_id``, when given), in one query;
    else as unknown as a missing one."""
    if not 0 < entry_id < 2**63:  # out of the column's range: cannot exist, and must not reach the database
        raise NotFoundError(f"Knowledge entry {entry_id} not found.")
    visible = knowledge_visible(user=user)
    if organization_id is not None:
        visible = visible.filter(organization_id=organization_id)
    try:
        return visible.get(pk=entry_id)
    except KnowledgeEntry.DoesNotExist as exc:
        raise NotFoundError(f"Knowledge entry {entry_id} not found.") from exc


@dataclass(frozen=True)
class KnowledgeLinks:
    """Keys of the projects (by key) and items (by project, then number) an entry links to."""

    projects: list[str] = field(default_factory=list)
    items: list[str] = field(default_factory=list)


def knowledge_links(*, user: Principal | None, entry_ids: Iterable[int]) -> dict[int, KnowledgeLinks]:
    """The links of each entry that ``user`` sees, in one query (docs/domain.md: links to projects, or to
    items of projects, where the user reads no knowledge are neither shown nor theirs to remove).

    Entries without a visible link have none in the answer.
    """
    ids = list(entry_ids)
    readable = project_ids_with(user, KNOWLEDGE_READ)
    no_number = Value(None, output_field=IntegerField())
    projects = KnowledgeEntry.projects.through.objects.filter(
        knowledgeentry_id__in=ids, project_id__in=readable
    ).values_list("knowledgeentry_id", "project__key", no_number)
    items = KnowledgeEntry.items.through.objects.filter(
        knowledgeentry_id__in=ids, item__project_id__in=readable
    ).values_list("knowledgeentry_id", "item__project__key", "item__number")
    found: dict[int, list[tuple[str, int | None]]] = defaultdict(list)
    for entry_id, key, number in projects.union(items, all=True):
        found[entry_id].append((key, number))
    return {
        entry_id: KnowledgeLinks(
            projects=sorted(key for key, number in links if number is None),
            items=[f"{key}-{number}" for key, number in sorted(n for n in links if n[1] is not None)],
        )
        for entry_id, links in found.items()
    }


def knowledge_revision_list(*, entry: KnowledgeEntry) -> list[KnowledgeRevision]:
    """Every version of the entry, newest first."""
    return list(KnowledgeRevision.objects.filter(entry=entry).select_related("editor").order_by("-version"))


def knowledge_snapshot(entry: KnowledgeEntry) -> dict[str, Any]:
    """The entry's current content, as a conflict answer carries it."""
    return {
        "id": entry.pk,
        "kind": entry.kind,
        "title": entry.title,
        "body": entry.body,
        "version": entry.version,
    }


def knowledge_of_project(
    *, user: Principal | None, project: Project, kind: str | None = None, q: str | None = None
) -> QuerySet[KnowledgeEntry]:
    """Of :func:`knowledge_list` (``kind``, ``q`` ranked by search), the entries of ``project``'s
    organization that concern it: linked to it or to one of its items, or linked to no project at
    all (the organization's own). Its pages list these."""
    qs = knowledge_list(user=user, kind=kind, q=q, organization_id=project.organization_id)
    through = KnowledgeEntry.projects.through.objects
    linked = through.filter(project=project).values("knowledgeentry_id")
    of_items = KnowledgeEntry.items.through.objects.filter(item__project=project).values("knowledgeentry_id")
    unlinked = ~Exists(through.filter(knowledgeentry_id=OuterRef("pk")))
    return qs.filter(Q(pk__in=linked) | Q(pk__in=of_items) | unlinked)


def knowledge_kind_counts(*, entries: QuerySet[KnowledgeEntry]) -> dict[str, int]:
    """How many of ``entries`` there are of each kind, in one query."""
    counted = entries.order_by().values("kind").annotate(n=Count("pk", distinct=True))
    return {row["kind"]: row["n"] for row in counted}
