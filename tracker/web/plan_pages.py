"""Browser pages of the plan (docs/architecture.md#the-plan-and-ticket-pages): ``/projects/{key}/``,
the tree, the board, filters and search, claims and recent activity; and
``/projects/{key}/items/{item_key}/``, one item with everything about it.

Views are thin: the one permission check picks the project (404 for whoever
cannot read it), :mod:`tracker.plan_selectors` and the tracker's selectors
read. A bad filter is a message on the page, never an error. Open questions
and linked knowledge belong to the planner and knowledge apps, which the
tracker does not import: their template tags read them for the reader.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from tracker.activity.text import ActivityLine, activity_line
from tracker.errors import BalletError, NotFoundError, ValidationError
from tracker.graph.plan_graph import project_graph
from tracker.graph.svg import graph_context, item_href
from tracker.models import ChangesetStatus, Claim, Item, ItemKind, Project, Report
from tracker.models.plan import ALL_STATES, Priority
from tracker.plan_selectors import (
    TicketRow,
    activity_recent,
    item_activity,
    item_changesets,
    open_blockers_by_item,
    plan_board,
    plan_tree,
)
from tracker.search import ITEM
from tracker.selectors import (
    changeset_list,
    claim_list,
    claims_active_by_item,
    item_dependencies,
    item_get,
    item_list,
    project_find,
    project_work_config,
    reports_on,
    runnable_tickets,
)
from tracker.trust.permissions import TRACKER_WRITE, has_permission
from tracker.web.item_actions import edit_draft_take, item_actions_context
from tracker.web.page_helpers import page_project, page_user, with_csp

MAX_ITEMS = 2000  # a plan longer than this shows its first ones and says so
MAX_QUERY = 500
MAX_KEY = 50
SEARCH_LIMIT = 50
REPORTS_SHOWN = 20
LAYOUTS = ("tree", "board")


@dataclass(frozen=True)
class PlanFilters:
    """The plan's GET parameters, as far as they are valid; ``errors`` says what was left out."""

    kind: str = ""
    state: str = ""
    epic: str = ""
    milestone: str = ""
    priority: str = ""
    label: str = ""
    q: str = ""
    runnable: bool = False
    layout: str = "tree"
    errors: tuple[str, ...] = ()

    @property
    def narrowed(self) -> bool:
        """Whether any filter leaves tickets out (the tree then hides its empty groups)."""
        return bool(
            self.kind
            or self.state
            or self.epic
            or self.milestone
            or self.priority
            or self.label
            or self.q
            or self.runnable
        )


def _text(params: QueryDict, name: str, limit: int, errors: list[str]) -> str:
    value = params.get(name, "")
    if "\x00" in value:
        errors.append(f"The {name} filter contains a NUL character; it was left out.")
        return ""
    if len(value) > limit:
        errors.append(f"The {name} filter is longer than {limit} characters; it was left out.")
        return ""
    return value.strip()


def _choice(params: QueryDict, name: str, choices: tuple[str, ...], errors: list[str]) -> str:
    value = _text(params, name, MAX_KEY, errors)
    if value and value not in choices:
        errors.append(f"Unknown {name} “{value}”: choose one of {', '.join(choices)}.")
        return ""
    return value


def plan_filters(params: QueryDict) -> PlanFilters:
    """The filters ``params`` ask for; an invalid one is left out with a message."""
    errors: list[str] = []
    view = _choice(params, "view", ("runnable",), errors)
    layout = _choice(params, "layout", LAYOUTS, errors) or "tree"
    return PlanFilters(
        kind=_choice(params, "kind", tuple(ItemKind.values), errors),
        state=_choice(params, "state", ALL_STATES, errors),
        epic=_text(params, "epic", MAX_KEY, errors),
        milestone=_text(params, "milestone", MAX_KEY, errors),
        priority=_choice(params, "priority", tuple(Priority.values), errors),
        label=_text(params, "label", MAX_KEY, errors),
        q=_text(params, "q", MAX_QUERY, errors),
        runnable=view == "runnable",
        layout=layout,
        errors=tuple(errors),
    )


def _filtered(project: Project, filters: PlanFilters, errors: list[str]) -> list[Item]:
    """The items the filters keep, by number; a parent filter naming no epic (milestone) is dropped."""
    fields = {
        "kind": filters.kind or None,
        "state": filters.state or None,
        "priority": filters.priority or None,
        "label": filters.label or None,
    }
    parents = {"epic": filters.epic or None, "milestone": filters.milestone or None}
    try:
        qs = item_list(project=project, **parents, **fields)
        items = list(qs[: MAX_ITEMS + 1])
    except ValidationError as exc:
        errors.extend(f"{message} That filter was left out." for message in exc.messages)
        items = list(item_list(project=project, **fields)[: MAX_ITEMS + 1])
    if len(items) > MAX_ITEMS:
        errors.append(f"This plan has more than {MAX_ITEMS} items: the first {MAX_ITEMS} are shown.")
    return items[:MAX_ITEMS]


def _ranked(
    user: User, project: Project, filters: PlanFilters, items: list[Item], errors: list[str]
) -> tuple[list[Item], list[Item]]:
    """Of ``items``, those the project's hybrid search finds for ``filters.q``, best first: its
    matches, and those only related to the query (shown apart)."""
    try:
        hits = project_find(
            user=user,
            project=project,
            query=filters.q,
            kinds=(ITEM,),
            item_kinds=[filters.kind] if filters.kind else (),
            states=[filters.state] if filters.state else (),
            limit=SEARCH_LIMIT,
        )
    except BalletError as exc:
        errors.append(f"The search could not run: {exc.message}")
        return [], []
    by_key = {item.key: item for item in items}
    found = [(hit, by_key[hit.key]) for hit in hits if hit.key in by_key]
    return [item for hit, item in found if not hit.related], [item for hit, item in found if hit.related]


@dataclass
class PlanPage:
    """What the plan page shows, read once per request."""

    rows: list[TicketRow]
    others: list[TicketRow] = field(default_factory=list)  # milestones and epics the filters kept
    ranked: list[TicketRow] | None = None  # the search's matches, when there is a query
    related: list[TicketRow] = field(default_factory=list)  # the search's hits only related to it
    errors: list[str] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)  # the project's active claims, newest first
    runnable_count: int = 0


def _plan_rows(user: User, project: Project, filters: PlanFilters) -> PlanPage:
    errors = list(filters.errors)
    items = _filtered(project, filters, errors)
    runnable = set(runnable_tickets(project=project).values_list("pk", flat=True))
    if filters.runnable:
        items = [item for item in items if item.pk in runnable]
    active = list(claim_list(project=project, active=True))
    claims = {claim.item_id: claim for claim in active}
    blockers = open_blockers_by_item(project=project)

    def row(item: Item) -> TicketRow:
        blocking = tuple(blockers.get(item.pk, ()))
        return TicketRow(item, claims.get(item.pk), blocking, item.pk in runnable)

    page = PlanPage(rows=[row(i) for i in items if i.kind == ItemKind.TICKET], errors=errors)
    page.others = [row(i) for i in items if i.kind != ItemKind.TICKET]
    if filters.q:
        matches, related = _ranked(user, project, filters, items, errors)
        page.ranked, page.related = [row(i) for i in matches], [row(i) for i in related]
    page.errors, page.claims, page.runnable_count = errors, active, len(runnable)
    return page


@require_GET
@login_required
@with_csp
def plan(request: HttpRequest, key: str) -> HttpResponse:
    """``/projects/{key}/``: the plan as a tree or a board, filtered, with claims and activity."""
    user = page_user(request)
    project = page_project(user, key)
    filters = plan_filters(request.GET)
    page = _plan_rows(user, project, filters)
    parents = list(item_list(project=project).filter(kind__in=[ItemKind.MILESTONE, ItemKind.EPIC]))
    shown = page.ranked if page.ranked is not None else page.rows
    context: dict[str, Any] = {
        "project": project,
        "filters": filters,
        "page": page,
        "tree": plan_tree(parents=parents, tickets=page.rows, keep_empty=not filters.narrowed),
        "board": plan_board(tickets=shown) if filters.layout == "board" else [],
        "milestones": [p for p in parents if p.kind == ItemKind.MILESTONE],
        "epics": [p for p in parents if p.kind == ItemKind.EPIC],
        "kinds": ItemKind.values,
        "states": ALL_STATES,
        "priorities": Priority.values,
        "labels": project_work_config(project).labels,
        "can_write": has_permission(user, project, TRACKER_WRITE),
        "activity": [activity_line(e, project_key=key) for e in activity_recent(user=user, project=project)],
        "proposed": changeset_list(project=project, status=ChangesetStatus.PROPOSED).count(),
        "knowledge_url": reverse("knowledge-list", args=[project.key]),
        "changesets_url": reverse("changeset-list", args=[project.key]),
        "base_query": _without(request.GET, "layout"),
    }
    context |= graph_context(
        project_graph(project=project),
        href=item_href(project),
        title=f"Dependency graph of {project.key}",
        label=f"Dependency graph of {project.key}",
    )
    return render(request, "tracker/plan.html", context)


def _without(params: QueryDict, name: str) -> str:
    """``params`` as a query string without ``name``, for the links that switch only that one."""
    kept = params.copy()
    kept.pop(name, None)
    return kept.urlencode()


@dataclass(frozen=True)
class ReportShown:
    """A report with the links it may show: only http(s) ones."""

    report: Report
    links: list[str]


def _safe_links(links: object) -> list[str]:
    if not isinstance(links, list):
        return []
    return [link for link in links if isinstance(link, str) and link.startswith(("http://", "https://"))]


def _children(project: Project, item: Item) -> dict[str, list[Item]]:
    """An epic's tickets; a milestone's epics and the tickets in it without an epic."""
    if item.kind == ItemKind.EPIC:
        return {"tickets": list(item_list(project=project, kind=ItemKind.TICKET).filter(epic=item))}
    if item.kind == ItemKind.MILESTONE:
        in_it = item_list(project=project).filter(milestone=item)
        return {
            "epics": list(in_it.filter(kind=ItemKind.EPIC)),
            "tickets": list(in_it.filter(kind=ItemKind.TICKET, epic__isnull=True)),
        }
    return {}


def _policy(item: Item) -> str:
    """The ticket's execution policy as indented JSON ("" for the default, none set)."""
    return json.dumps(item.policy, indent=2, ensure_ascii=False, sort_keys=True) if item.policy else ""


def _criteria(item: Item) -> list[str]:
    criteria = item.acceptance_criteria
    return [c for c in criteria if isinstance(c, str)] if isinstance(criteria, list) else []


def _activity(user: User, item: Item) -> list[ActivityLine]:
    return [activity_line(e, project_key=item.project.key) for e in item_activity(user=user, item=item)]


@require_GET
@login_required
@with_csp
def item_page(request: HttpRequest, key: str, item_key: str) -> HttpResponse:
    """``/projects/{key}/items/{item_key}/``: a ticket, an epic or a milestone and all about it."""
    user = page_user(request)
    project = page_project(user, key)
    try:
        item = item_get(project=project, key=item_key)
    except NotFoundError as exc:
        raise Http404("Item not found.") from exc
    reports = reports_on(item=item, limit=REPORTS_SHOWN)
    context = {
        "project": project,
        "item": item,
        "dependencies": item_dependencies(item=item),
        "claim": claims_active_by_item(item_ids=[item.pk]).get(item.pk),
        "reports": [ReportShown(report, _safe_links(report.links)) for report in reports],
        "children": _children(project, item),
        "changesets": item_changesets(item=item),
        "activity": _activity(user, item),
        "policy": _policy(item),
        "criteria": _criteria(item),
    }
    context |= item_actions_context(user, project, item, draft=edit_draft_take(request, item))
    return render(request, "tracker/item.html", context)
