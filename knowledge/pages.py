"""Browser pages of the knowledge base: a project's entries (by kind, searchable), where members
write a new one, and one entry with its links and revisions, where they edit it
(docs/architecture.md#pages).

Views are thin: :func:`tracker.web.page_helpers.page_project` is the one permission check, every
entry is read through ``knowledge.selectors``, where docs/domain.md#knowledge's visibility is
defined (an entry the reader may not read is absent from the list and a 404 on its own page, and
links to what the reader cannot read are not shown), and every write is ``knowledge.services``'s,
with its checks and versions: an edit sends the version it read, and a stale one shows the entry as
it is now beside the text the user wrote, nothing saved. Bodies are Markdown rendered by
``ballet.markdown`` (sanitized); an item key becomes a link only where the reader may open it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import render
from django.utils.safestring import SafeString
from django.views.decorators.http import require_http_methods

from ballet import markdown
from knowledge.models import KnowledgeEntry, KnowledgeKind, KnowledgeRevision
from knowledge.selectors import (
    knowledge_get,
    knowledge_kind_counts,
    knowledge_links,
    knowledge_of_project,
    knowledge_revision_list,
)
from knowledge.services import MAX_BODY, MAX_TITLE, knowledge_create, knowledge_editable, knowledge_update
from tracker.errors import ConflictError, NotFoundError, PermissionDeniedError, ValidationError
from tracker.models import Project
from tracker.page_links import item_url, knowledge_url
from tracker.selectors import items_found_by_keys
from tracker.services.activity import Actor
from tracker.trust.permissions import KNOWLEDGE_READ, KNOWLEDGE_WRITE, has_permission, project_ids_with
from tracker.web.page_helpers import page_project, page_user, with_csp

MAX_LISTED = 100
MAX_QUERY = 200
MAX_KEYS = 500  # item keys looked up for links on one page


@dataclass(frozen=True)
class KindTab:
    """One kind of the list's filter: its value (empty: every kind), label and count."""

    value: str
    label: str
    count: int


@dataclass
class Draft:
    """What the entry form holds: the user's kind, title and body (kept as typed on an error), the
    version they read, the projects a new entry is also linked to, and what was wrong."""

    kind: str = KnowledgeKind.NOTE
    title: str = ""
    body: str = ""
    version: int | str = 0
    projects: list[str] = field(default_factory=list)
    errors: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def posted(cls, post: QueryDict) -> Draft:
        version = post.get("version", "")
        return cls(
            kind=post.get("kind", ""),
            title=post.get("title", ""),
            body=post.get("body", "").replace("\r\n", "\n"),
            version=int(version)
            if version.isascii() and version.isdigit() and len(version) < 16
            else version,
            projects=post.getlist("projects"),
        )

    @property
    def general_errors(self) -> list[str]:
        return [
            m for where, found in self.errors.items() if where not in ("kind", "title", "body") for m in found
        ]


def _project(user: User, key: str) -> Project:
    """The project if ``user`` reads its knowledge; as unknown as a missing one otherwise."""
    try:
        return page_project(user, key, KNOWLEDGE_READ)
    except PermissionDenied as exc:
        raise Http404("Project not found.") from exc


def _key_links(user: User, texts: Iterable[str]) -> Callable[[str], str | None]:
    """``link_key`` for :func:`ballet.markdown.render`: the page of an item the reader may open,
    looked up for every key of ``texts`` at once; None (left as text) for any other key."""
    keys: dict[str, None] = {}
    for text in texts:
        for match in markdown.KEY.finditer(text[: markdown.MAX_SOURCE]):
            keys[match.group(1)] = None
            if len(keys) >= MAX_KEYS:
                break
    found = items_found_by_keys(user=user, keys=keys)
    return lambda key: item_url(found[key].project.key, key) if key in found else None


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


def _also_linkable(user: User, project: Project) -> list[Project]:
    """The organization's other projects where ``user`` may link a new entry (knowledge.write)."""
    ids = project_ids_with(user, KNOWLEDGE_WRITE)
    others = Project.objects.filter(organization_id=project.organization_id, pk__in=ids)
    return list(others.exclude(pk=project.pk).order_by("key"))


@require_http_methods(["GET", "POST"])
@login_required
@with_csp
def knowledge_list_page(request: HttpRequest, key: str) -> HttpResponse:
    """``/projects/{key}/knowledge/``: the entries of the project the reader may read
    (``?kind=``: of one kind; ``?q=``: the best answers to a search); a POST writes a new entry
    linked to this project (and to the other projects ticked) and opens it."""
    user = page_user(request)
    project = _project(user, key)
    draft = Draft()
    if request.method == "POST":
        draft = Draft.posted(request.POST)
        entry = _create(user, project, draft)
        if entry is not None:
            messages.success(request, "The entry was written.")
            return HttpResponseRedirect(knowledge_url(project.key, entry.pk))
    kind, query, errors = _filters(request.GET.get("kind", ""), request.GET.get("q", ""))
    every_kind = knowledge_of_project(user=user, project=project, q=query or None)
    listed = every_kind.filter(kind=kind) if kind else every_kind
    entries = list(listed[: MAX_LISTED + 1])
    tabs = _tabs(knowledge_kind_counts(entries=every_kind))
    writer = has_permission(user, project, KNOWLEDGE_WRITE)
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
        "can_write": writer,
        "draft": draft,
        "kinds": KnowledgeKind.choices,
        "also_linkable": _also_linkable(user, project) if writer else [],
        "max_title": MAX_TITLE,
        "max_body": MAX_BODY,
    }
    return render(request, "knowledge/list.html", context, status=400 if errors or draft.errors else 200)


def _create(user: User, project: Project, draft: Draft) -> KnowledgeEntry | None:
    """The new entry, or None with ``draft.errors`` saying why not; 403 for one who may not write."""
    if not has_permission(user, project, KNOWLEDGE_WRITE):
        raise PermissionDenied("You need knowledge.write in this project to write an entry.")
    others = {p.key: p for p in _also_linkable(user, project)}
    unknown = [name for name in draft.projects if name not in others and name != project.key]
    if unknown:
        draft.errors["projects"] = [f"Unknown project {name[:20]!r}." for name in unknown[:5]]
        return None
    linked = [project, *(others[name] for name in dict.fromkeys(draft.projects) if name in others)]
    try:
        return knowledge_create(
            actor=Actor(user=user), kind=draft.kind, title=draft.title, body=draft.body, projects=linked
        )
    except ValidationError as exc:
        draft.errors = exc.errors
    except PermissionDeniedError as exc:
        raise PermissionDenied(exc.message) from exc
    return None


@dataclass(frozen=True)
class ItemLink:
    key: str
    url: str


@dataclass(frozen=True)
class ShownRevision:
    revision: KnowledgeRevision
    html: SafeString


@require_http_methods(["GET", "POST"])
@login_required
@with_csp
def knowledge_entry_page(request: HttpRequest, key: str, entry_id: int) -> HttpResponse:
    """``/projects/{key}/knowledge/{id}/``: an entry of the project's organization the reader may
    read; a POST edits it (kind, title, body at the version read)."""
    user = page_user(request)
    project = _project(user, key)
    try:
        entry = knowledge_get(user=user, entry_id=entry_id, organization_id=project.organization_id)
    except NotFoundError as exc:
        raise Http404(exc.message) from exc
    editable = knowledge_editable(user=user, entry=entry)
    draft = Draft(kind=entry.kind, title=entry.title, body=entry.body, version=entry.version)
    conflict: dict[str, Any] | None = None
    if request.method == "POST":
        if not editable:
            raise PermissionDenied("You need knowledge.write in a project this entry is linked to.")
        draft = Draft.posted(request.POST)
        fields = {"kind": draft.kind, "title": draft.title, "body": draft.body}
        try:
            knowledge_update(actor=Actor(user=user), entry=entry, version=draft.version, fields=fields)
        except ConflictError as exc:
            conflict = exc.current or {}
            draft.errors = {"version": [exc.message]}
        except ValidationError as exc:
            draft.errors = exc.errors
        except PermissionDeniedError as exc:
            raise PermissionDenied(exc.message) from exc
        except NotFoundError as exc:
            raise Http404(exc.message) from exc
        else:
            messages.success(request, "The entry was saved.")
            return HttpResponseRedirect(knowledge_url(project.key, entry.pk))
        entry.refresh_from_db()
    return _entry_page(request, project, entry, editable=editable, draft=draft, conflict=conflict)


def _entry_page(
    request: HttpRequest,
    project: Project,
    entry: KnowledgeEntry,
    *,
    editable: bool,
    draft: Draft,
    conflict: dict[str, Any] | None,
) -> HttpResponse:
    user = page_user(request)
    links = knowledge_links(user=user, entry_ids=[entry.pk]).get(entry.pk)
    items = [
        ItemLink(key=item_key, url=item_url(item_key.rsplit("-", 1)[0], item_key))
        for item_key in (links.items if links else [])
    ]
    revisions = list(knowledge_revision_list(entry=entry))
    link_key = _key_links(user, [entry.body, *(revision.body for revision in revisions)])
    if conflict is not None:
        # The user resends at the version they have now seen: a second save keeps their text.
        draft.version = entry.version
    context = {
        "project": project,
        "entry": entry,
        "kind_label": KnowledgeKind(entry.kind).label if entry.kind in KnowledgeKind.values else entry.kind,
        "body": markdown.render(entry.body, link_key=link_key),
        "projects": links.projects if links else [],
        "items": items,
        "revisions": [ShownRevision(r, markdown.render(r.body, link_key=link_key)) for r in revisions],
        "editable": editable,
        "draft": draft,
        "conflict": conflict,
        "kinds": KnowledgeKind.choices,
        "max_title": MAX_TITLE,
        "max_body": MAX_BODY,
    }
    status = 409 if conflict is not None else 400 if draft.errors else 200
    return render(request, "knowledge/entry.html", context, status=status)
