"""Browser pages of changeset review: a project's changesets, one changeset made readable, and
Apply / Reject with a note for holders of ``changeset.apply`` (docs/architecture.md#pages).

Views are thin: :func:`tracker.web.page_helpers.page_project` is the one permission check,
``changeset_list`` / ``changeset_get`` read, :func:`tracker.review.changeset_review` makes the
operations readable (as the admin's review does), and ``changeset_apply`` / ``changeset_reject``
decide, four eyes included: the page only asks :func:`four_eyes_forbids` to explain beforehand
what Apply would refuse.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import Case, IntegerField, QuerySet, Value, When
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from tracker.errors import BalletError, NotFoundError, error_text
from tracker.graph.impact import ImpactTicket, changeset_impact
from tracker.graph.plan_graph import PlanGraph
from tracker.graph.svg import graph_context, item_href
from tracker.models import Changeset, ChangesetStatus, Project
from tracker.page_links import item_url
from tracker.review import changeset_review, created_titles
from tracker.selectors import changeset_get, changeset_list
from tracker.services.activity import Actor
from tracker.services.changesets import (
    FOUR_EYES_REASON,
    MAX_NOTE,
    changeset_apply,
    changeset_reject,
    four_eyes_forbids,
)
from tracker.trust.permissions import CHANGESET_APPLY, has_permission
from tracker.web.page_helpers import page_project, page_user, with_csp

MAX_LISTED = 200
DECISIONS = ("apply", "reject")


def _listed(project: Project, status: str) -> QuerySet[Changeset]:
    """Proposed ones first (they wait for a decision), then the rest, newest first."""
    waiting = Case(
        When(status=ChangesetStatus.PROPOSED, then=Value(0)), default=Value(1), output_field=IntegerField()
    )
    return changeset_list(project=project, status=status or None).order_by(waiting, "-number")


@require_GET
@login_required
@with_csp
def changeset_list_page(request: HttpRequest, key: str) -> HttpResponse:
    """``/projects/{key}/changesets/``: the project's changesets (``?status=``: of one status)."""
    project = page_project(page_user(request), key)
    status = request.GET.get("status", "")
    error = ""
    if status and status not in ChangesetStatus.values:
        error = f"Unknown status. Choose one of: {', '.join(ChangesetStatus.values)}."
        status = ""
    listed = _listed(project, status)
    rows = list(listed[: MAX_LISTED + 1])
    context = {
        "project": project,
        "changesets": rows[:MAX_LISTED],
        "more": len(rows) > MAX_LISTED,
        "total": listed.count() if len(rows) > MAX_LISTED else len(rows),
        "status": status,
        "statuses": ChangesetStatus.values,
        "error": error,
    }
    return render(request, "tracker/changeset_list.html", context, status=400 if error else 200)


def _changeset(project: Project, number: int) -> Changeset:
    try:
        return changeset_get(project=project, number=number)
    except NotFoundError as exc:
        raise Http404(exc.message) from exc


def review_context(user: User, project: Project, changeset: Changeset) -> dict[str, Any]:
    """What the review page shows of ``changeset`` to ``user``, its impact while it is proposed."""
    proposed = changeset.status == ChangesetStatus.PROPOSED
    can_decide = proposed and has_permission(user, project, CHANGESET_APPLY)
    return {
        "project": project,
        "changeset": changeset,
        "review": changeset_review(changeset=changeset),
        "can_decide": can_decide,
        "four_eyes": can_decide and four_eyes_forbids(user=user, changeset=changeset),
        "four_eyes_reason": FOUR_EYES_REASON,
        "max_note": MAX_NOTE,
        "impact": impact_shown(project, changeset) if proposed else None,
        "created": [
            (titles.get(ref, "A new item"), key)
            for titles in [created_titles(changeset.operations)]
            for ref, key in (changeset.created_items or {}).items()
        ],
        "error": "",
        "note": "",
    }


@dataclass(frozen=True)
class TicketShown:
    """A ticket an impact names, with its page if it exists already."""

    key: str
    title: str
    new: bool
    href: str | None


def impact_shown(project: Project, changeset: Changeset) -> dict[str, Any]:
    """The impact of applying ``changeset`` now, as the page shows it: each list of tickets with
    links, the longest chain before and after, and the graph before and after, each with its list."""
    impact = changeset_impact(changeset=changeset)
    href = item_href(project)

    def shown(tickets: tuple[ImpactTicket, ...]) -> list[TicketShown]:
        return [
            TicketShown(t.key, t.title, t.new, None if t.new else item_url(project.key, t.key))
            for t in tickets
        ]

    graphs = {}
    before, after = impact.graph_before, impact.graph_after
    if before is not None:
        title = f"Dependency graph of {project.key} now"
        graphs["before"] = graph_context(before, href=href, title=title, label=title)
    if after is not None:
        after = _new_named(after)
        added = frozenset(after.edges) - frozenset(before.edges if before else ())
        removed = frozenset(before.edges if before else ()) - frozenset(after.edges)
        title = f"Dependency graph of {project.key} once applied"
        graphs["after"] = graph_context(
            after, href=href, title=title, label=title, added=added, removed=removed
        )
    return {
        "unavailable": impact.unavailable,
        "changes_runnable": impact.changes_runnable,
        "lists": [
            ("Become runnable", shown(impact.becomes_runnable)),
            ("Stop being runnable", shown(impact.stops_runnable)),
            ("Become blocked", shown(impact.becomes_blocked)),
            ("Get unblocked", shown(impact.unblocked)),
        ],
        "chain_before": shown(impact.chain_before),
        "chain_after": shown(impact.chain_after),
        "chain_unchanged": [t.key for t in impact.chain_before] == [t.key for t in impact.chain_after],
        "graphs": graphs,
    }


def _new_named(graph: PlanGraph) -> PlanGraph:
    """The graph once applied with its new tickets called "New 1", "New 2"… in its boxes and
    list (their titles beside): the impact names them by the changeset's refs (``$login``),
    which a reader never needs to see."""
    names = {node.key: f"New {n}" for n, node in enumerate((n for n in graph.nodes if n.new), start=1)}
    if not names:
        return graph

    def name(key: str) -> str:
        return names.get(key, key)

    return PlanGraph(
        nodes=tuple(replace(node, key=name(node.key)) for node in graph.nodes),
        edges=tuple((name(a), name(b)) for a, b in graph.edges),
        chain=tuple(name(key) for key in graph.chain),
    )


def _render_review(
    request: HttpRequest, project: Project, changeset: Changeset, *, status: int = 200, **extra: Any
) -> HttpResponse:
    context = review_context(page_user(request), project, changeset) | extra
    return render(request, "tracker/changeset_review.html", context, status=status)


@require_GET
@login_required
@with_csp
def changeset_review_page(request: HttpRequest, key: str, number: int) -> HttpResponse:
    """``/projects/{key}/changesets/{number}/``: the review."""
    project = page_project(page_user(request), key)
    return _render_review(request, project, _changeset(project, number))


def _refused(
    request: HttpRequest, project: Project, number: int, exc: BalletError, note: str
) -> HttpResponse:
    """The review again, fresh, with why the decision was refused (nothing of it was written)."""
    changeset = _changeset(project, number)
    return _render_review(request, project, changeset, status=exc.status, error=error_text(exc), note=note)


@require_POST
@login_required
@with_csp
def changeset_decide_page(request: HttpRequest, key: str, number: int) -> HttpResponse:
    """``/projects/{key}/changesets/{number}/decide/``: ``decision`` (apply or reject) and ``note``."""
    user = page_user(request)
    project = page_project(user, key)
    changeset = _changeset(project, number)
    if not has_permission(user, project, CHANGESET_APPLY):
        raise PermissionDenied(f"You need changeset.apply in {project.key} to decide.")
    decision, note = request.POST.get("decision", ""), request.POST.get("note", "")
    shown_note = note.replace("\x00", "\ufffd")[:MAX_NOTE]
    if decision not in DECISIONS:
        return _render_review(
            request, project, changeset, status=400, error="Choose Apply or Reject.", note=shown_note
        )
    try:
        decided = _decide(user, changeset, decision, note)
    except BalletError as exc:
        return _refused(request, project, number, exc, shown_note)
    if decided.status == ChangesetStatus.CONFLICTED:
        message = (
            "Not applied: the changeset conflicts with the plan as it is now, so nothing of it was "
            f"applied and it is marked conflicted. {decided.conflict_reason}"
        )
        return _render_review(request, project, decided, status=409, error=message)
    messages.success(request, _decided_message(decided))
    return HttpResponseRedirect(reverse("changeset-review", args=[project.key, decided.number]))


def _decide(user: User, changeset: Changeset, decision: str, note: str) -> Changeset:
    if decision == "apply":
        return changeset_apply(actor=Actor(user=user), changeset=changeset, note=note)
    return changeset_reject(actor=Actor(user=user), changeset=changeset, note=note)


def _decided_message(changeset: Changeset) -> str:
    if changeset.status == ChangesetStatus.REJECTED:
        return f"Rejected changeset #{changeset.number}: {changeset.title}"
    created = ", ".join(changeset.created_items.values()) if changeset.created_items else ""
    return f"Applied changeset #{changeset.number}: {changeset.title}" + (
        f". Created {created}." if created else ""
    )
