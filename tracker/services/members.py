"""Who belongs to a project: invitations (nobody joins without accepting), roles, removal, and
agents, the users an owner makes for coding agents (docs/api-keys.md#agents).

An owner could once add any user as a member and then read and revoke her keys;
now a user joins only by accepting an invitation, and a project's owner sees
only the keys bound to the project (``tracker.selectors.key_list_of_project``).
Every change here is an activity event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.crypto import get_random_string
from django.utils.text import slugify

from tracker.db.locks import locked as row_locked
from tracker.errors import InvalidStateError, NotFoundError, ValidationError
from tracker.inputs import refuse_nul
from tracker.models import (
    Agent,
    ApiKey,
    Invitation,
    InvitationStatus,
    Membership,
    Notice,
    NotifyKind,
    Project,
    Role,
)
from tracker.services.activity import Actor, activity_record
from tracker.services.keys import key_create, key_name_clean
from tracker.services.notifications import notify_users
from tracker.trust.permissions import PROJECT_ADMIN, require

MAX_USERNAME = 150
MAX_EMAIL = 254
AGENT_ROLES = (Role.VIEWER, Role.MEMBER, Role.MAINTAINER)  # an agent never administers a project
INBOX_URL = "/inbox/"
NO_SUCH_USER = "No such user."


def _role_clean(role: Any, allowed: Iterable[str] = Role.values) -> str:
    allowed = list(allowed)
    if not isinstance(role, str) or role not in allowed:
        raise ValidationError({"role": [f"Expected one of: {', '.join(allowed)}."]})
    return role


def _record(actor: Actor, project: Project, verb: str, target: str, **data: Any) -> None:
    activity_record(
        actor=actor,
        organization_id=project.organization_id,
        project=project,
        verb=verb,
        target=target,
        data=data,
    )


# --- invitations -------------------------------------------------------------------------------


def invitee_find(*, username: Any = None, email: Any = None) -> User:
    """The active human user named by ``username`` or ``email`` (case-insensitive); one readable
    "No such user." for anyone else, which tells nothing about who exists."""
    if (username is None) == (email is None):
        raise ValidationError({"username": ["Give a username or an e-mail address, not both."]})
    field, value, limit = (
        ("username", username, MAX_USERNAME) if email is None else ("email", email, MAX_EMAIL)
    )
    if not isinstance(value, str) or not value.strip() or len(value) > limit or "\x00" in value:
        raise ValidationError({field: [f"Expected 1 to {limit} characters."]})
    lookup = {f"{field}__iexact": value.strip()}
    found = list(User.objects.filter(**lookup, is_active=True).select_related("agent")[:2])
    # An e-mail two accounts share names no one in particular; an agent is never invited.
    if len(found) != 1 or hasattr(found[0], "agent"):
        raise ValidationError({field: [NO_SUCH_USER]}, NO_SUCH_USER)
    return found[0]


@transaction.atomic
def invitation_create(
    *, actor: Actor, project: Project, username: Any = None, email: Any = None, role: Any
) -> Invitation:
    """Invite a user to ``project`` with ``role``: a pending invitation and an inbox notice for
    them. They become a member only by accepting (:func:`invitation_accept`)."""
    require(actor.user, project, PROJECT_ADMIN)
    role = _role_clean(role)
    user = invitee_find(username=username, email=email)
    field = "username" if email is None else "email"
    if user.pk == actor.user.pk:
        raise ValidationError({field: ["You cannot invite yourself."]}, "You cannot invite yourself.")
    name = user.get_username()
    if Membership.objects.filter(project=project, user=user).exists():
        message = f"{name} is already a member of {project.key}; change their role instead."
        raise ValidationError({field: [message]}, message)
    if Invitation.objects.filter(project=project, user=user, status=InvitationStatus.PENDING).exists():
        message = f"{name} has a pending invitation to {project.key} already."
        raise ValidationError({field: [message]}, message)
    try:
        with transaction.atomic():
            invitation = Invitation.objects.create(
                project=project, user=user, role=role, invited_by=actor.user
            )
    except IntegrityError as exc:  # a twin invitation committed meanwhile
        message = f"{name} has a pending invitation to {project.key} already."
        raise ValidationError({field: [message]}, message) from exc
    title = f"{actor.user.get_username()} invites you to {project.key} · {project.name} as {role}"[:300]
    Notice.objects.create(user=user, project=project, kind="invitation", title=title, url=INBOX_URL)
    # Their mail and their live count (docs/events.md#people); the inbox lists the invitation itself.
    notify_users([user], NotifyKind.INVITATION, title, f"{INBOX_URL}#invitation-{invitation.pk}", project)
    _record(actor, project, "invitation.created", f"user:{name}", role=role, invitation=invitation.pk)
    return invitation


def _decided(invitation: Invitation, user: User, status: str) -> Invitation:
    """The invitation locked, if it is ``user``'s (NotFoundError otherwise), pending or already
    ``status`` (a retry); InvalidStateError once decided otherwise."""
    locked = row_locked(Invitation.objects.filter(pk=invitation.pk, user_id=user.pk)).select_related(
        "project"
    )
    found = locked.first()
    if found is None:
        raise NotFoundError(f"Invitation {invitation.pk} not found.")
    if found.status not in (InvitationStatus.PENDING, status):
        raise InvalidStateError(
            f"This invitation was {found.status}; ask an owner of {found.project.key} again."
        )
    return found


@transaction.atomic
def invitation_accept(*, user: User, invitation: Invitation) -> Membership:
    """``user`` accepts their invitation: a member with its role (accepting again changes nothing)."""
    found = _decided(invitation, user, InvitationStatus.ACCEPTED)
    project = found.project
    if found.status == InvitationStatus.ACCEPTED:
        membership = Membership.objects.filter(project=project, user=user).first()
        if membership is None:
            raise InvalidStateError(f"You were removed from {project.key} since you accepted.")
        return membership
    membership, _ = Membership.objects.get_or_create(
        project=project, user=user, defaults={"role": found.role}
    )
    found.status, found.decided_at = InvitationStatus.ACCEPTED, timezone.now()
    found.save(update_fields=["status", "decided_at"])
    _record(
        Actor(user=user), project, "invitation.accepted", f"user:{user.get_username()}", role=membership.role
    )
    return membership


@transaction.atomic
def invitation_decline(*, user: User, invitation: Invitation) -> Invitation:
    """``user`` declines their invitation (declining again changes nothing)."""
    found = _decided(invitation, user, InvitationStatus.DECLINED)
    if found.status == InvitationStatus.PENDING:
        found.status, found.decided_at = InvitationStatus.DECLINED, timezone.now()
        found.save(update_fields=["status", "decided_at"])
        _record(Actor(user=user), found.project, "invitation.declined", f"user:{user.get_username()}")
    return found


@transaction.atomic
def invitation_cancel(*, actor: Actor, project: Project, invitation_id: Any) -> Invitation:
    """An owner withdraws a pending invitation of ``project``."""
    require(actor.user, project, PROJECT_ADMIN)
    found = (
        row_locked(Invitation.objects.filter(pk=invitation_id, project=project))
        .select_related("user")
        .first()
        if isinstance(invitation_id, int) and 0 < invitation_id < 2**63
        else None
    )
    if found is None:
        raise NotFoundError(f"Invitation {invitation_id} not found.")
    if found.status == InvitationStatus.CANCELLED:
        return found
    if found.status != InvitationStatus.PENDING:
        raise InvalidStateError(f"This invitation was {found.status} already.")
    found.status, found.decided_at = InvitationStatus.CANCELLED, timezone.now()
    found.save(update_fields=["status", "decided_at"])
    _record(actor, project, "invitation.cancelled", f"user:{found.user.get_username()}")
    return found


# --- memberships -------------------------------------------------------------------------------


@transaction.atomic
def membership_set(
    *, actor: Actor, project: Project, username: str, role: str, join: bool = False
) -> Membership:
    """Change the role of ``username`` in ``project``.

    A user who is not a member is refused: they join by accepting an invitation.
    ``join`` adds them at once, for callers that act with the user's consent by
    construction (the demo's seed, an agent made by the owner) — never a request.
    """
    require(actor.user, project, PROJECT_ADMIN)
    role = _role_clean(role)
    user = _user(username)
    if not join and not Membership.objects.filter(project=project, user=user).exists():
        message = (
            f"{username} is not a member of {project.key}: nobody joins a project without accepting; "
            f"invite them with POST /api/v1/projects/{project.key}/invitations/."
        )
        raise ValidationError({"username": [message]}, message)
    if role != Role.OWNER:
        _keep_an_owner(project, user)
    membership, _ = Membership.objects.update_or_create(project=project, user=user, defaults={"role": role})
    _record(actor, project, "membership.set", f"user:{user.get_username()}", role=role)
    return membership


@transaction.atomic
def membership_remove(*, actor: Actor, project: Project, username: str) -> None:
    require(actor.user, project, PROJECT_ADMIN)
    user = _user(username)
    _keep_an_owner(project, user)
    deleted, _ = Membership.objects.filter(project=project, user=user).delete()
    if not deleted:
        raise NotFoundError(f"{username} is not a member of {project.key}.")
    _record(actor, project, "membership.removed", f"user:{username}")


def _keep_an_owner(project: Project, leaving: User) -> None:
    """Refuse to remove or demote the project's last owner."""
    owners = row_locked(Membership.objects.filter(project=project, role=Role.OWNER))
    if list(owners.values_list("user_id", flat=True)) == [leaving.pk]:
        message = f"{leaving.get_username()} is the last owner of {project.key}."
        raise ValidationError({"username": [message]}, message)


def _user(username: Any) -> User:
    found = (
        User.objects.filter(username=username).first()
        if isinstance(username, str) and 0 < len(username) <= MAX_USERNAME and "\x00" not in username
        else None
    )
    if found is None:
        raise ValidationError({"username": [f"No user named {str(username)[:MAX_USERNAME]!r}."]})
    return found


# --- agents ------------------------------------------------------------------------------------


def _agent_username(name: str) -> str:
    """A free username from the agent's name: ``ci-bot``, ``ci-bot-2``, …"""
    base = slugify(name)[:40].strip("-_") or "agent"
    for number in range(1, 20):
        candidate = base if number == 1 else f"{base}-{number}"
        if not User.objects.filter(username__iexact=candidate).exists():
            return candidate
    return f"{base}-{get_random_string(8).lower()}"


@transaction.atomic
def agent_create(
    *,
    actor: Actor,
    project: Project,
    name: Any,
    scopes: Iterable[object],
    role: Any = Role.MEMBER,
    expires_in_days: int | None = None,
) -> tuple[Agent, ApiKey, str]:
    """An owner makes an agent of ``project``: a user who cannot sign in to the pages, a member
    with ``role``, and its first key, bound to the project: the key string, shown this once."""
    require(actor.user, project, PROJECT_ADMIN)
    refuse_nul(name=name)
    name = key_name_clean(name)
    role = _role_clean(role, AGENT_ROLES)
    user = User(username=_agent_username(name), first_name=name[:150], is_active=True)
    user.set_unusable_password()
    user.save()
    agent = Agent.objects.create(user=user, project=project, created_by=actor.user)
    Membership.objects.create(project=project, user=user, role=role)
    key, secret = key_create(
        user=user,
        name=name,
        scopes=scopes,
        expires_in_days=expires_in_days,
        projects=[project],
        created_by=actor.user,
    )
    _record(actor, project, "agent.created", f"user:{user.username}", role=role, scopes=key.scopes)
    return agent, key, secret


def agent_get(*, project: Project, username: Any) -> Agent:
    found = (
        Agent.objects.filter(project=project, user__username=username).select_related("user").first()
        if isinstance(username, str) and len(username) <= MAX_USERNAME
        else None
    )
    if found is None:
        raise NotFoundError(f"No agent {str(username)[:MAX_USERNAME]!r} in {project.key}.")
    return found


@transaction.atomic
def agent_key_create(
    *,
    actor: Actor,
    project: Project,
    agent: Agent,
    name: Any,
    scopes: Iterable[object],
    expires_in_days: int | None = None,
) -> tuple[ApiKey, str]:
    """Another key of ``agent``, bound to its project; the key string, shown this once."""
    require(actor.user, project, PROJECT_ADMIN)
    if agent.project_id != project.pk:
        raise NotFoundError(f"No agent {agent.user.get_username()!r} in {project.key}.")
    key, secret = key_create(
        user=agent.user,
        name=name,
        scopes=scopes,
        expires_in_days=expires_in_days,
        projects=[project],
        created_by=actor.user,
    )
    _record(actor, project, "agent.key_created", f"user:{agent.user.username}", scopes=key.scopes)
    return key, secret
