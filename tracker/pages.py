"""Browser pages of the tracker: the home page listing the projects the user may read.

Views are thin: the one permission check picks the projects, the selectors
count their tickets. The chat pages belong to the planner.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from tracker.models import ChangesetStatus, ItemKind, Membership, Project
from tracker.models.plan import RESOLVED_STATES
from tracker.permissions import AnyUser, visible_projects
from tracker.selectors import changeset_list, item_list, runnable_tickets


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
        review_url=f"{reverse('admin:index')}tracker/changeset/?project__id__exact={project.pk}",
        api_url=f"/api/v1/projects/{project.key}/",
    )


def project_cards(user: AnyUser) -> list[ProjectCard]:
    """A card per project ``user`` may read, with the user's role there."""
    roles = dict(Membership.objects.filter(user_id=user.pk or 0).values_list("project_id", "role"))
    return [_project_card(p, roles.get(p.pk, "superuser")) for p in visible_projects(user)]


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    """``/``: the user's projects."""
    assert isinstance(request.user, User)  # login_required let only a signed-in user through
    return render(request, "tracker/home.html", {"cards": project_cards(request.user)})
