"""Browser pages of the tracker: the home page listing the projects the user may read (and the
invitations waiting for them), and the user's API keys (with, for a project's owners, the keys
bound to the project).

Views are thin: the one permission check picks the projects, the selectors
count their tickets, the key services make and revoke keys. The chat pages
belong to the planner.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from tracker.errors import NotFoundError, ValidationError
from tracker.member_selectors import invitation_list_of_user
from tracker.models import ApiKey, ChangesetStatus, ItemKind, Membership, Project
from tracker.models.plan import RESOLVED_STATES
from tracker.selectors import (
    changeset_list,
    item_list,
    key_get,
    key_list,
    key_list_of_project,
    runnable_tickets,
)
from tracker.services.keys import key_create, key_projects_clean, key_revoke
from tracker.trust.permissions import PROJECT_ADMIN, AnyUser, project_ids_with, visible_projects
from tracker.web.credentials import LEGACY_TOKEN_SUNSET
from tracker.web.forms import KeyCreateForm
from tracker.web.page_helpers import form_issued, form_used, no_store, page_project, page_user, with_csp

MAX_LISTED_KEYS = 200


@dataclass(frozen=True)
class ProjectCard:
    """What the home page shows about one project."""

    project: Project
    role: str
    open_tickets: int
    runnable: int
    awaiting_review: int
    review_url: str
    api_url: str


def _project_card(project: Project, role: str) -> ProjectCard:
    tickets = item_list(project=project, kind=ItemKind.TICKET).exclude(state__in=RESOLVED_STATES)
    return ProjectCard(
        project=project,
        role=role,
        open_tickets=tickets.count(),
        runnable=runnable_tickets(project=project).count(),
        awaiting_review=changeset_list(project=project, status=ChangesetStatus.PROPOSED).count(),
        review_url=reverse("changeset-list", args=[project.key]),
        api_url=f"/api/v1/projects/{project.key}/",
    )


def project_cards(user: AnyUser) -> list[ProjectCard]:
    """A card per project ``user`` may read, with the user's role there."""
    roles = dict(Membership.objects.filter(user_id=user.pk or 0).values_list("project_id", "role"))
    return [_project_card(p, roles.get(p.pk, "superuser")) for p in visible_projects(user)]


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    """``/``: the user's projects, and the invitations waiting for their answer."""
    user = page_user(request)
    context = {
        "cards": project_cards(user),
        "invitations": invitation_list_of_user(user=user)[:MAX_LISTED_KEYS],
    }
    return render(request, "tracker/home.html", context)


@require_http_methods(["GET", "POST"])
@login_required
@with_csp
@no_store
def keys(request: HttpRequest) -> HttpResponse:
    """``/keys/``: the user's API keys; POST makes one and shows its key, this once. The answer to
    a POST is the page itself (the key is kept nowhere to show after a redirect), so each form
    carries a one-time value: a reload that sends the form again makes no second key."""
    user = page_user(request)
    if request.method == "POST" and not form_used(request, request.POST.get("once", "")):
        sent = "That form was sent already; its key was shown once. Revoke it if no one copied it."
        messages.info(request, sent)
        return HttpResponseRedirect(reverse("keys"))
    readable = list(visible_projects(user)[:MAX_LISTED_KEYS])
    form = KeyCreateForm(request.POST if request.method == "POST" else None, projects=readable)
    made, secret = None, ""
    if form.is_valid():
        try:
            data = form.cleaned_data
            data["projects"] = key_projects_clean(user=user, keys=data.get("projects") or [])
            made, secret = key_create(user=user, **data)
        except ValidationError as exc:
            for field, errors in exc.errors.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            form = KeyCreateForm(projects=readable)
    owned = Project.objects.filter(pk__in=project_ids_with(user, PROJECT_ADMIN))
    context = {
        "form": form,
        "once": form_issued(request),
        "keys": key_list(user=user)[:MAX_LISTED_KEYS],
        "made": made,
        "secret": secret,
        "projects": [(project, key_list_of_project(project=project)[:MAX_LISTED_KEYS]) for project in owned],
        "sunset": LEGACY_TOKEN_SUNSET,
    }
    return render(request, "tracker/keys.html", context)


@require_POST
@login_required
@no_store
def key_revoke_page(request: HttpRequest, key_id: int) -> HttpResponse:
    """``/keys/{id}/revoke/``: revoke one of the user's keys, back to the list."""
    return _revoked(request, key_list(user=page_user(request)), key_id)


@require_POST
@login_required
@no_store
def project_key_revoke_page(request: HttpRequest, key: str, key_id: int) -> HttpResponse:
    """``/projects/{key}/keys/{id}/revoke/``: a project's owner revokes a key bound to the project
    (never a member's other keys); its holder is told in their inbox."""
    project = page_project(page_user(request), key, PROJECT_ADMIN)
    return _revoked(request, key_list_of_project(project=project), key_id, project=project)


def _revoked(
    request: HttpRequest, keys: QuerySet[ApiKey], key_id: int, *, project: Project | None = None
) -> HttpResponse:
    try:
        key = key_get(keys=keys, key_id=key_id)
    except NotFoundError as exc:
        raise Http404(exc.message) from exc
    key_revoke(key=key, by=page_user(request), project=project)
    messages.success(request, f"Revoked the key {key.name} ({key.prefix}): it no longer works.")
    return HttpResponseRedirect(reverse("keys"))
