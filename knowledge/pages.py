"""Browser pages of the knowledge base: a project's entries (by kind, searchable) and one entry with
its links and revisions (docs/architecture.md#pages).

Views are thin: :func:`tracker.web.page_helpers.page_project` is the one permission check, and every
entry is read through ``knowledge.selectors``, where docs/domain.md#knowledge's visibility is
defined: an entry the reader may not read is absent from the list and a 404 on its own page, and
links to what the reader cannot read are not shown. Bodies are Markdown shown as escaped text.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from knowledge.models import KnowledgeKind
from knowledge.selectors import (
    knowledge_get,
    knowledge_kind_counts,
    knowledge_links,
    knowledge_of_project,
    knowledge_revision_list,
)
from tracker.errors import NotFoundError
from tracker.models import Project
from tracker.page_links import item_url
from tracker.trust.permissions import KNOWLEDGE_READ
from tracker.web.page_helpers import page_project, page_user, with_csp

MAX_LISTED = 100
MAX_QUERY = 200


@dataclass(frozen=True)
class KindTab:
    """One kind of the list's filter: its value (empty: every kind), label and count."""

    value: str
    label: str
    count: int


def _project(user: User, key: str) -> Project:
    """The project if ``user`` reads its knowledge; as unknown as a missing one otherwise."""
    try:
        return page_project(user, key, KNOWLEDGE_READ)
    except PermissionDenied as exc:
        raise Http404("Project not found.") from exc


def _filters(kind: str, query: str) -> tuple[str, str, list[str]]:
    """The ``kind`` and ``q`` to list by, and what was wrong with them (then left out)."""
    errors = []
    if kind and kind not in KnowledgeKind.values:
        errors.append(f"Unknown kind. Choose one of: {', '.join(KnowledgeKind.values)}.")
        kind = ""
    if "\x00" in query or len(query) > MAX_QUERY:
        errors.append(f"A search is at most {MAX_QUERY} characters of text.")
        query = ""
    return kind, query.strip(), errors


def _tabs(counts: dict[str, int]) -> list[KindTab]:
    every = KindTab(value="", label="All", count=sum(counts.values()))
    return [every] + [
        KindTab(value, str(label), counts.get(value, 0)) for value, label in KnowledgeKind.choices
    ]


@require_GET
@login_required
@with_csp
def knowledge_list_page(request: HttpRequest, key: str) -> HttpResponse:
    """``/projects/{key}/knowledge/``: the entries of the project the reader may read
    (``?kind=``: of one kind; ``?q=``: the best answers to a search)."""
    user = page_user(request)
    project = _project(user, key)
    kind, query, errors = _filters(request.GET.get("kind", ""), request.GET.get("q", ""))
    every_kind = knowledge_of_project(user=user, project=project, q=query or None)
    listed = every_kind.filter(kind=kind) if kind else every_kind
    entries = list(listed[: MAX_LISTED + 1])
    tabs = _tabs(knowledge_kind_counts(entries=every_kind))
    context = {
        "project": project,
        "entries": entries[:MAX_LISTED],
        "more": len(entries) > MAX_LISTED,
        "total": next(tab.count for tab in tabs if tab.value == kind),
        "kind": kind,
        "kind_label": KnowledgeKind(kind).label if kind else "",
        "query": query,
        "tabs": tabs,
        "errors": errors,
        "max_query": MAX_QUERY,
    }
    return render(request, "knowledge/list.html", context, status=400 if errors else 200)


@dataclass(frozen=True)
class ItemLink:
    key: str
    url: str


@require_GET
@login_required
@with_csp
def knowledge_entry_page(request: HttpRequest, key: str, entry_id: int) -> HttpResponse:
    """``/projects/{key}/knowledge/{id}/``: an entry of the project's organization the reader may read."""
    user = page_user(request)
    project = _project(user, key)
    try:
        entry = knowledge_get(user=user, entry_id=entry_id, organization_id=project.organization_id)
    except NotFoundError as exc:
        raise Http404(exc.message) from exc
    links = knowledge_links(user=user, entry_ids=[entry.pk]).get(entry.pk)
    items = [
        ItemLink(key=item_key, url=item_url(item_key.rsplit("-", 1)[0], item_key))
        for item_key in (links.items if links else [])
    ]
    context = {
        "project": project,
        "entry": entry,
        "kind_label": KnowledgeKind(entry.kind).label if entry.kind in KnowledgeKind.values else entry.kind,
        "projects": links.projects if links else [],
        "items": items,
        "revisions": knowledge_revision_list(entry=entry),
    }
    return render(request, "knowledge/entry.html", context)
