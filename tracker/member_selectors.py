"""Reads about who belongs to a project: members, invitations, agents with their keys, claims and
last activity (the members page and REST, ``tracker.services.members`` for the writes)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import User
from django.db.models import Count, Max, Q, QuerySet

from tracker.errors import NotFoundError
from tracker.inputs import MAX_BIG_ID
from tracker.models import ActivityEvent, Agent, ApiKey, Invitation, InvitationStatus, Membership, Project
from tracker.models.work import ClaimStatus

MAX_LISTED = 200


def member_list(*, project: Project) -> QuerySet[Membership]:
    """The project's members by username (agents included: they are members too)."""
    return Membership.objects.filter(project=project).select_related("user").order_by("user__username")


def invitation_list_of_project(*, project: Project, pending: bool = True) -> QuerySet[Invitation]:
    found = Invitation.objects.filter(project=project).select_related("user", "invited_by", "project")
    return found.filter(status=InvitationStatus.PENDING) if pending else found


def invitation_list_of_user(*, user: User) -> QuerySet[Invitation]:
    """``user``'s pending invitations, newest first."""
    return Invitation.objects.filter(user_id=user.pk, status=InvitationStatus.PENDING).select_related(
        "project", "invited_by"
    )


def invitation_of_user(*, user: User, invitation_id: int) -> Invitation:
    """``user``'s own invitation ``invitation_id``, whatever its status; NotFoundError for anyone
    else's (no one learns that another user's invitation exists)."""
    found = (
        Invitation.objects.filter(pk=invitation_id, user_id=user.pk).select_related("project").first()
        if 0 < invitation_id <= MAX_BIG_ID
        else None
    )
    if found is None:
        raise NotFoundError(f"Invitation {invitation_id} not found.")
    return found


@dataclass(frozen=True)
class AgentRow:
    """An agent as its project's owners see it."""

    agent: Agent
    role: str
    keys: list[ApiKey]
    active_claims: int
    last_activity: datetime | None


def agent_list(*, project: Project) -> list[AgentRow]:
    """The project's agents with their keys bound to it, claims held and last activity."""
    agents = list(
        Agent.objects.filter(project=project)
        .select_related("user")
        .annotate(
            active_claims=Count(
                "user__claims",
                filter=Q(user__claims__project=project, user__claims__status=ClaimStatus.ACTIVE),
            )
        )
        .order_by("user__username")[:MAX_LISTED]
    )
    ids = [agent.user_id for agent in agents]
    roles = dict(Membership.objects.filter(project=project, user_id__in=ids).values_list("user_id", "role"))
    last = dict(
        ActivityEvent.objects.filter(project=project, on_behalf_of_id__in=ids)
        .values("on_behalf_of_id")
        .annotate(last=Max("created_at"))
        .values_list("on_behalf_of_id", "last")
    )
    keys: dict[int, list[ApiKey]] = {pk: [] for pk in ids}
    for key in ApiKey.objects.filter(user_id__in=ids, projects=project).distinct():
        keys[key.user_id].append(key)
    used = {pk: max((k.last_used_at for k in keys[pk] if k.last_used_at), default=None) for pk in ids}
    return [
        AgentRow(
            agent=agent,
            role=roles.get(agent.user_id, ""),
            keys=keys[agent.user_id],
            active_claims=getattr(agent, "active_claims", 0),
            last_activity=max((t for t in (last.get(agent.user_id), used[agent.user_id]) if t), default=None),
        )
        for agent in agents
    ]
