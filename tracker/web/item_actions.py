"""The ticket page's actions (docs/architecture.md#the-plan-and-ticket-pages): move the state, edit
the fields, add and remove blockers, claim and release; and the plan's quick "New ticket".

Each POST view parses the form, checks access with the one permission check (404 for whoever
cannot read the project, 403 without tracker.write), calls one service and redirects back with a
message saying what happened: applied as a changeset, proposed for review, a conflict with a newer
version (nothing changed), or the field errors in words. The edits themselves are
:mod:`tracker.services.item_edits`; claims are :mod:`tracker.services.work`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from tracker.errors import BalletError, ConflictError, NotFoundError, ValidationError
from tracker.models import Claim, Item, ItemKind, Project
from tracker.models.plan import Priority
from tracker.operations import allowed_moves
from tracker.selectors import claims_active_by_item, item_get, item_list, project_work_config
from tracker.services.activity import Actor
from tracker.services.item_edits import EditOutcome, direct_edit_allowed, item_create_quick, item_edit
from tracker.services.work import claim_release, claim_take
from tracker.trust.permissions import TRACKER_WRITE, has_permission
from tracker.web.page_helpers import page_project, page_user, with_csp

# A state move as its button says it, by (from, to); a move not named here reads "Move to <to>".
MOVE_WORDS: dict[tuple[str, str], str] = {
    ("draft", "ready"): "Mark ready",
    ("ready", "draft"): "Back to draft",
    ("ready", "in_progress"): "Start (in progress)",
    ("in_progress", "ready"): "Stop (back to ready)",
    ("in_progress", "in_review"): "Ask for review",
    ("in_review", "done"): "Accept (done)",
    ("in_review", "in_progress"): "Send back",
    ("done", "ready"): "Reopen",
    ("cancelled", "ready"): "Reopen",
    ("cancelled", "draft"): "Reopen as draft",
    ("open", "done"): "Mark done",
    ("done", "open"): "Reopen",
    ("cancelled", "open"): "Reopen",
}
FIELD_WORDS = {
    "title": "Title",
    "description": "Description",
    "acceptance_criteria": "Acceptance criteria",
    "state": "State",
    "epic": "Epic",
    "milestone": "Milestone",
    "priority": "Priority",
    "labels": "Labels",
    "policy": "Policy",
    "version": "Version",
    "kind": "Kind",
    "add_blockers": "Blocker to add",
    "remove_blockers": "Blocker to remove",
    "non_field_errors": "Edit",
}
MAX_FIELD = 25_000  # a form value longer than any field takes is refused before the service sees it
# The session's copy of a refused edit (field errors, a newer version), given back to the form once.
EDIT_DRAFT = "ballet_item_edit_draft"


@dataclass(frozen=True)
class Move:
    state: str
    label: str


def move_label(start: str, target: str) -> str:
    if target == "cancelled":
        return "Cancel"
    return MOVE_WORDS.get((start, target), f"Move to {target.replace('_', ' ')}")


def edit_draft_take(request: HttpRequest, item: Item) -> dict[str, Any] | None:
    """The edit of ``item`` this session sent and had refused, once: the form shows it again."""
    draft = request.session.get(EDIT_DRAFT)
    if not isinstance(draft, dict) or draft.get("item") != item.pk:
        return None
    del request.session[EDIT_DRAFT]
    return draft


def _edit_values(item: Item, draft: dict[str, Any] | None) -> dict[str, Any]:
    """What the edit form shows: the item as it is, or the refused edit over it."""
    values = {
        "title": item.title,
        "description": item.description,
        "criteria": "\n".join(c for c in item.acceptance_criteria if isinstance(c, str))
        if isinstance(item.acceptance_criteria, list)
        else "",
        "epic": item.epic.key if item.epic else "",
        "milestone": item.milestone.key if item.milestone else "",
        "priority": item.priority,
        "labels": list(item.labels) if isinstance(item.labels, list) else [],
        "refused": False,
    }
    if draft is not None:
        values |= {name: draft[name] for name in values if name in draft} | {"refused": True}
    return values


def item_actions_context(
    user: User, project: Project, item: Item, draft: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What the item page's actions panel needs: nothing for a reader without tracker.write.
    ``draft``: an edit that was refused, shown again in the form (opened) to fix or resend."""
    if not has_permission(user, project, TRACKER_WRITE):
        return {"can_write": False}
    config = project_work_config(project)
    parents = list(item_list(project=project).filter(kind__in=[ItemKind.EPIC, ItemKind.MILESTONE]))
    return {
        "can_write": True,
        "edit": _edit_values(item, draft),
        "moves": [
            Move(target, move_label(item.state, target)) for target in allowed_moves(item.kind, item.state)
        ],
        "epic_choices": [p for p in parents if p.kind == ItemKind.EPIC],
        "milestone_choices": [p for p in parents if p.kind == ItemKind.MILESTONE],
        "priorities": Priority.values,
        "label_choices": config.labels,
        "edits_applied": direct_edit_allowed(project=project, fields=["title"], dependencies=False),
        "moves_applied": direct_edit_allowed(project=project, fields=["state"], dependencies=False),
    }


def _item_url(project: Project, item_key: str) -> str:
    return reverse("item", args=[project.key, item_key])


def _writable(request: HttpRequest, key: str, item_key: str) -> tuple[User, Project, Item]:
    user = page_user(request)
    page_project(user, key)  # 404 for whoever cannot read the project
    project = page_project(user, key, TRACKER_WRITE)  # 403 for a viewer
    try:
        return user, project, item_get(project=project, key=item_key)
    except NotFoundError as exc:
        raise Http404("Item not found.") from exc


def _outcome_message(request: HttpRequest, project: Project, outcome: EditOutcome, done: str) -> None:
    number = outcome.changeset.number
    url = reverse("changeset-review", args=[project.key, number])
    if outcome.applied:
        messages.success(
            request, format_html('{} Applied as <a href="{}">changeset #{}</a>.', done, url, number)
        )
    else:
        messages.info(
            request, format_html('Proposed as <a href="{}">changeset #{}</a> for review.', url, number)
        )


def _error_message(request: HttpRequest, exc: BalletError) -> None:
    if isinstance(exc, ConflictError):
        messages.error(request, exc.message)
    elif isinstance(exc, ValidationError) and exc.errors:
        for name, errors in exc.errors.items():
            words = FIELD_WORDS.get(name, name.replace("_", " ").capitalize())
            messages.error(request, f"{words}: {' '.join(errors)}")
    else:
        messages.error(request, exc.message)


def _version(request: HttpRequest) -> int | str:
    """The version the form read; a non-number is handed on as text and refused by the service."""
    text = request.POST.get("version", "")
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else text


def _edit(
    request: HttpRequest,
    key: str,
    item_key: str,
    call: Callable[[Actor, Item], EditOutcome],
    done: str,
    *,
    keep: Callable[[Item], dict[str, Any]] | None = None,
) -> HttpResponse:
    """Run ``call``, say what came of it, and go back to the item; ``keep`` gives what to hand
    back to the form if the edit is refused (a draft, :func:`edit_draft_take`)."""
    user, project, item = _writable(request, key, item_key)
    try:
        outcome = call(Actor(user=user), item)
    except BalletError as exc:
        _error_message(request, exc)
        if keep is not None:
            request.session[EDIT_DRAFT] = {"item": item.pk, **keep(item)}
    else:
        _outcome_message(request, project, outcome, done)
    return HttpResponseRedirect(_item_url(project, item.key))


def _text(request: HttpRequest, name: str) -> str:
    value = request.POST.get(name, "")
    return value.replace("\r\n", "\n")[:MAX_FIELD]


def _shown(text: str) -> str:
    """Text sent in a refused edit, as the form shows it again (without NUL, which the service refused)."""
    return text.replace("\x00", "")


def _parent(request: HttpRequest, name: str) -> str | None:
    return request.POST.get(name, "").strip()[:MAX_FIELD] or None


def edit_fields(request: HttpRequest, item: Item) -> dict[str, Any]:
    """The fields the edit form sent, for ``item``'s kind (a ticket has an epic, criteria and labels,
    a milestone no milestone); those left as they are the service drops. Labels are checkboxes:
    none ticked is no labels, when the form showed them (``labels_shown``)."""
    post = request.POST
    fields: dict[str, Any] = {}
    if "title" in post:
        fields["title"] = _text(request, "title").strip()
    if "description" in post:
        fields["description"] = _text(request, "description")
    if "priority" in post:
        fields["priority"] = post["priority"][:50]
    if item.kind == ItemKind.TICKET:
        if "acceptance_criteria" in post:
            lines = _text(request, "acceptance_criteria").split("\n")
            fields["acceptance_criteria"] = [line.strip() for line in lines if line.strip()]
        if "epic" in post:
            fields["epic"] = _parent(request, "epic")
        if "labels_shown" in post:
            fields["labels"] = [label[:50] for label in post.getlist("labels")]
    if item.kind != ItemKind.MILESTONE and "milestone" in post:
        fields["milestone"] = _parent(request, "milestone")
    return fields


@require_POST
@login_required
@with_csp
def item_edit_page(request: HttpRequest, key: str, item_key: str) -> HttpResponse:
    """``items/{item_key}/edit/``: the edit form (title, description, criteria, parents, priority,
    labels) at the version it read."""
    return _edit(
        request,
        key,
        item_key,
        lambda actor, item: item_edit(
            actor=actor, item=item, version=_version(request), fields=edit_fields(request, item)
        ),
        "Saved.",
        keep=lambda item: _draft(request, item),
    )


def _draft(request: HttpRequest, item: Item) -> dict[str, Any]:
    """The edit form as it was sent, to show again (bounded: the session keeps it)."""
    post = request.POST
    return {
        "title": _shown(_text(request, "title")[:1000]),
        "description": _shown(_text(request, "description")),
        "criteria": _shown(_text(request, "acceptance_criteria")),
        "epic": post.get("epic", "")[:50],
        "milestone": post.get("milestone", "")[:50],
        "priority": post.get("priority", "")[:50],
        "labels": [label[:50] for label in post.getlist("labels")[:50]],
    }


@require_POST
@login_required
@with_csp
def item_move_page(request: HttpRequest, key: str, item_key: str) -> HttpResponse:
    """``items/{item_key}/move/``: one state move (``state``) at the version read."""
    state = request.POST.get("state", "")[:50]
    return _edit(
        request,
        key,
        item_key,
        lambda actor, item: item_edit(
            actor=actor, item=item, version=_version(request), fields={"state": state}
        ),
        f"Moved to {state.replace('_', ' ')}.",
    )


@require_POST
@login_required
@with_csp
def item_blockers_page(request: HttpRequest, key: str, item_key: str) -> HttpResponse:
    """``items/{item_key}/blockers/``: ``add`` a blocker by key, or ``remove`` one."""
    add = request.POST.get("add", "").strip()[:100]
    remove = request.POST.get("remove", "").strip()[:100]

    def change(actor: Actor, item: Item) -> EditOutcome:
        if not add and not remove:
            raise ValidationError({"add_blockers": ["Type the key of the item that must be resolved first."]})
        return item_edit(
            actor=actor,
            item=item,
            version=_version(request),
            add_blockers=[add] if add else [],
            remove_blockers=[remove] if remove else [],
        )

    done = f"Added blocker {add.upper()}." if add else f"Removed blocker {remove.upper()}."
    return _edit(request, key, item_key, change, done)


def _claim_action(
    request: HttpRequest, key: str, item_key: str, act: Callable[[Actor, Project, Item], str]
) -> HttpResponse:
    user, project, item = _writable(request, key, item_key)
    try:
        messages.success(request, act(Actor(user=user), project, item))
    except BalletError as exc:
        _error_message(request, exc)
    return HttpResponseRedirect(_item_url(project, item.key))


def _take(actor: Actor, project: Project, item: Item) -> str:
    claim_take(actor=actor, project=project, item=item)
    return f"You claimed {item.key}: it is in progress."


def _release(actor: Actor, project: Project, item: Item) -> str:
    claim: Claim | None = claims_active_by_item(item_ids=[item.pk]).get(item.pk)
    if claim is None:
        raise ValidationError({"claim": ["Nobody holds this ticket."]}, "Nobody holds this ticket.")
    released = claim_release(actor=actor, claim=claim, reason="released on the ticket's page")
    return f"Released the claim of {released.holder.get_username()} on {item.key}: it is ready again."


@require_POST
@login_required
@with_csp
def item_claim_page(request: HttpRequest, key: str, item_key: str) -> HttpResponse:
    """``items/{item_key}/claim/``: claim the runnable ticket yourself."""
    return _claim_action(request, key, item_key, _take)


@require_POST
@login_required
@with_csp
def item_release_page(request: HttpRequest, key: str, item_key: str) -> HttpResponse:
    """``items/{item_key}/release/``: release the claim on the ticket (anyone's, with tracker.write)."""
    return _claim_action(request, key, item_key, _release)


@require_POST
@login_required
@with_csp
def item_new_page(request: HttpRequest, key: str) -> HttpResponse:
    """``items/new/``: the plan's quick "New ticket" (a title, optionally an epic)."""
    user = page_user(request)
    page_project(user, key)
    project = page_project(user, key, TRACKER_WRITE)
    plan_url = reverse("plan", args=[project.key])
    try:
        outcome = item_create_quick(
            actor=Actor(user=user),
            project=project,
            title=_text(request, "title"),
            epic=_parent(request, "epic"),
        )
    except BalletError as exc:
        _error_message(request, exc)
        return HttpResponseRedirect(plan_url)
    created = outcome.changeset.created_items.get("new") if outcome.applied else None
    if created:
        url = reverse("changeset-review", args=[project.key, outcome.changeset.number])
        messages.success(
            request,
            format_html(
                'Created <a href="{}">{}</a>. Applied as <a href="{}">changeset #{}</a>.',
                _item_url(project, created),
                created,
                url,
                outcome.changeset.number,
            ),
        )
    else:
        _outcome_message(request, project, outcome, "")
    return HttpResponseRedirect(plan_url)
