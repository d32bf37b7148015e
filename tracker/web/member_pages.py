"""``/projects/{key}/members/``: an owner's page of the project's members, invitations and agents;
and the invited user's accept and decline forms (``/invitations/{id}/accept/``).

Like the settings page, it answers 404 to whoever cannot read the project and 403
to a reader who is not an owner. Every form posts to its own URL and comes back
here with a message, except the new agent's: its answer shows the agent's key,
this once (no-store, and a one-time form value so that a reload makes no second
agent, as on ``/keys/``). Writes go through ``tracker.services.members``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from tracker.errors import BalletError, NotFoundError, ValidationError
from tracker.member_selectors import (
    MAX_LISTED,
    agent_list,
    invitation_list_of_project,
    invitation_of_user,
    member_list,
)
from tracker.models import Project, Role, Scope
from tracker.selectors import key_get, key_list_of_project
from tracker.services.activity import Actor
from tracker.services.keys import MAX_EXPIRY_DAYS, key_revoke
from tracker.services.keys import MAX_NAME as MAX_KEY_NAME
from tracker.services.members import (
    AGENT_ROLES,
    MAX_EMAIL,
    agent_create,
    invitation_accept,
    invitation_cancel,
    invitation_create,
    invitation_decline,
    membership_remove,
    membership_set,
)
from tracker.trust.permissions import PROJECT_ADMIN
from tracker.web.page_helpers import (
    View,
    form_issued,
    form_used,
    no_store,
    page_project,
    page_user,
    with_csp,
)

ROLE_CHOICES = [(role.value, role.label) for role in Role]


class InviteForm(forms.Form):
    who = forms.CharField(
        label="Username or e-mail",
        max_length=MAX_EMAIL,
        help_text="They join only once they accept, from their inbox or home page.",
    )
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial=Role.MEMBER)


class AgentForm(forms.Form):
    name = forms.CharField(max_length=MAX_KEY_NAME, help_text="Which agent it is, such as “CI bot”.")
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=[Scope.READ, Scope.ASK, Scope.WORK],
    )
    role = forms.ChoiceField(choices=[(role.value, role.label) for role in AGENT_ROLES], initial=Role.MEMBER)
    expires_in_days = forms.IntegerField(
        label="Key expires after (days)", min_value=1, max_value=MAX_EXPIRY_DAYS, required=False
    )


def _owned(request: HttpRequest, key: str) -> Project:
    return page_project(page_user(request), key, PROJECT_ADMIN)


def _back(project: Project) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("members", args=[project.key]))


def _told(request: HttpRequest, exc: BalletError) -> None:
    detail = exc.messages if isinstance(exc, ValidationError) else []
    messages.error(request, " ".join(detail) if detail else exc.message)


def _members_page(
    request: HttpRequest,
    project: Project,
    *,
    invite: InviteForm | None = None,
    agent_form: AgentForm | None = None,
    made: dict[str, Any] | None = None,
) -> HttpResponse:
    context = {
        "project": project,
        "members": member_list(project=project)[:MAX_LISTED],
        "roles": ROLE_CHOICES,
        "invitations": invitation_list_of_project(project=project)[:MAX_LISTED],
        "agents": agent_list(project=project),
        "invite_form": invite or InviteForm(),
        "agent_form": agent_form or AgentForm(),
        "once": form_issued(request),
        "made": made,
        "me": request.user,
    }
    return render(request, "tracker/members.html", context)


@require_GET
@login_required
@with_csp
@no_store
def members_page(request: HttpRequest, key: str) -> HttpResponse:
    """The members, their roles, pending invitations and agents, for the project's owners."""
    return _members_page(request, _owned(request, key))


@require_POST
@login_required
@with_csp
def member_invite_page(request: HttpRequest, key: str) -> HttpResponse:
    project = _owned(request, key)
    form = InviteForm(request.POST)
    if not form.is_valid():
        return _members_page(request, project, invite=form)
    who: str = form.cleaned_data["who"].strip()
    found = {"email": who} if "@" in who else {"username": who}
    try:
        invitation_create(
            actor=Actor(user=page_user(request)), project=project, role=form.cleaned_data["role"], **found
        )
    except ValidationError as exc:
        form.add_error("who", exc.messages)
        return _members_page(request, project, invite=form)
    messages.success(request, f"Invited {who}: they join {project.key} once they accept.")
    return _back(project)


@require_POST
@login_required
def member_role_page(request: HttpRequest, key: str) -> HttpResponse:
    project = _owned(request, key)
    username, role = request.POST.get("username", ""), request.POST.get("role", "")
    try:
        membership_set(actor=Actor(user=page_user(request)), project=project, username=username, role=role)
    except BalletError as exc:
        _told(request, exc)
    else:
        messages.success(request, f"{username} is now {role} in {project.key}.")
    return _back(project)


@require_POST
@login_required
def member_remove_page(request: HttpRequest, key: str) -> HttpResponse:
    project = _owned(request, key)
    username = request.POST.get("username", "")
    try:
        membership_remove(actor=Actor(user=page_user(request)), project=project, username=username)
    except BalletError as exc:
        _told(request, exc)
    else:
        messages.success(request, f"Removed {username} from {project.key}.")
    return _back(project)


@require_POST
@login_required
def invitation_cancel_page(request: HttpRequest, key: str, invitation_id: int) -> HttpResponse:
    project = _owned(request, key)
    try:
        invitation_cancel(actor=Actor(user=page_user(request)), project=project, invitation_id=invitation_id)
    except NotFoundError as exc:
        raise Http404(exc.message) from exc
    except BalletError as exc:
        _told(request, exc)
    else:
        messages.success(request, "Cancelled the invitation.")
    return _back(project)


def mcp_config(request: HttpRequest, secret: str) -> str:
    """The ``.mcp.json`` block of README's MCP section, with this server and the new key."""
    url = request.build_absolute_uri("/mcp")
    server = {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {secret}"}}
    return json.dumps({"mcpServers": {"ballet": server}}, indent=2)


@require_POST
@login_required
@with_csp
@no_store
def agent_create_page(request: HttpRequest, key: str) -> HttpResponse:
    """A new agent and its key: the answer shows the key, this once."""
    project = _owned(request, key)
    if not form_used(request, request.POST.get("once", "")):
        messages.info(
            request, "That form was sent already; its key was shown once. Revoke it if no one copied it."
        )
        return _back(project)
    form = AgentForm(request.POST)
    if not form.is_valid():
        return _members_page(request, project, agent_form=form)
    try:
        agent, made, secret = agent_create(
            actor=Actor(user=page_user(request)), project=project, **form.cleaned_data
        )
    except ValidationError as exc:
        for field, errors in exc.errors.items():
            form.add_error(field if field in form.fields else None, errors)
        return _members_page(request, project, agent_form=form)
    shown = {
        "username": agent.user.username,
        "key": made,
        "secret": secret,
        "mcp": mcp_config(request, secret),
    }
    return _members_page(request, project, made=shown)


@require_POST
@login_required
def agent_key_revoke_page(request: HttpRequest, key: str, key_id: int) -> HttpResponse:
    """An owner revokes a key bound to the project (an agent's, or a member's bound one)."""
    project = _owned(request, key)
    try:
        found = key_get(keys=key_list_of_project(project=project), key_id=key_id)
    except NotFoundError as exc:
        raise Http404(exc.message) from exc
    key_revoke(key=found, by=page_user(request), project=project)
    messages.success(request, f"Revoked the key {found.name} ({found.prefix}): it no longer works.")
    return _back(project)


def _after_decision(request: HttpRequest, fallback: str) -> HttpResponseRedirect:
    target = request.POST.get("next", "")
    allowed = url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure())
    return HttpResponseRedirect(target if target and allowed else fallback)


def _decide(decide: Callable[..., Any], verb: str) -> View:
    @require_POST
    @login_required
    def view(request: HttpRequest, invitation_id: int) -> HttpResponse:
        user = page_user(request)
        try:
            invitation = invitation_of_user(user=user, invitation_id=invitation_id)
        except NotFoundError as exc:
            raise Http404(exc.message) from exc
        try:
            decide(user=user, invitation=invitation)
        except BalletError as exc:
            _told(request, exc)
            return _after_decision(request, reverse("home"))
        project = invitation.project
        messages.success(request, f"You {verb} the invitation to {project.key} · {project.name}.")
        fallback = reverse("plan", args=[project.key]) if verb == "accepted" else reverse("home")
        return _after_decision(request, fallback)

    view.__name__ = f"invitation_{verb}_page"
    return view


invitation_accept_page = _decide(invitation_accept, "accepted")
invitation_decline_page = _decide(invitation_decline, "declined")
