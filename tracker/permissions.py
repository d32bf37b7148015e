"""The one access check: roles grant permissions in a project.

REST, admin, pages, WebSocket and planner tools all ask :func:`has_permission`
(or :func:`require`, which raises). Someone who cannot read a project is told
it does not exist.
"""

from __future__ import annotations

from typing import Final

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from tracker.errors import NotFoundError, PermissionDeniedError
from tracker.models import Membership, Project, Role

TRACKER_READ: Final = "tracker.read"
TRACKER_WRITE: Final = "tracker.write"
SKILL_READ: Final = "skill.read"
SKILL_WRITE: Final = "skill.write"
KNOWLEDGE_READ: Final = "knowledge.read"
KNOWLEDGE_WRITE: Final = "knowledge.write"
PLANNER_CHAT: Final = "planner.chat"
CHANGESET_APPLY: Final = "changeset.apply"
POLICY_SET: Final = "policy.set"
PROJECT_ADMIN: Final = "project.admin"

_VIEWER = frozenset({TRACKER_READ, SKILL_READ, KNOWLEDGE_READ})
_MEMBER = _VIEWER | {TRACKER_WRITE, KNOWLEDGE_WRITE, PLANNER_CHAT}
_MAINTAINER = _MEMBER | {CHANGESET_APPLY, POLICY_SET, SKILL_WRITE}
_OWNER = _MAINTAINER | {PROJECT_ADMIN}

ROLE_PERMISSIONS: Final[dict[str, frozenset[str]]] = {
    Role.VIEWER: _VIEWER,
    Role.MEMBER: _MEMBER,
    Role.MAINTAINER: _MAINTAINER,
    Role.OWNER: _OWNER,
}
ALL_PERMISSIONS: Final = _OWNER

AnyUser = User | AnonymousUser

_ROLE_CACHE = "_ballet_roles"


def _roles(user: AnyUser) -> dict[int, str]:
    """The user's role per project id, loaded once per user object."""
    cached: dict[int, str] | None = getattr(user, _ROLE_CACHE, None)
    if cached is None:
        cached = dict(Membership.objects.filter(user_id=user.pk or 0).values_list("project_id", "role"))
        setattr(user, _ROLE_CACHE, cached)
    return cached


def forget_roles(user: AnyUser) -> None:
    """Drop the cached roles after a membership of ``user`` changed."""
    if hasattr(user, _ROLE_CACHE):
        delattr(user, _ROLE_CACHE)


def permissions_for(user: AnyUser | None, project_id: int) -> frozenset[str]:
    """Every permission ``user`` holds in the project."""
    if user is None or not user.is_authenticated or not user.is_active:
        return frozenset()
    if getattr(user, "is_superuser", False):
        return ALL_PERMISSIONS
    role = _roles(user).get(project_id)
    return ROLE_PERMISSIONS.get(role, frozenset()) if role else frozenset()


def has_permission(user: AnyUser | None, project: Project | int, permission: str) -> bool:
    """The one check: does ``user`` hold ``permission`` in ``project``?"""
    if permission not in ALL_PERMISSIONS:
        raise ValueError(f"unknown permission {permission!r}")
    project_id = project if isinstance(project, int) else project.pk
    return permission in permissions_for(user, project_id)


def require(user: AnyUser | None, project: Project, permission: str) -> None:
    """Raise unless ``user`` holds ``permission``; hide projects the user cannot read."""
    if has_permission(user, project, permission):
        return
    if not has_permission(user, project, TRACKER_READ):
        raise NotFoundError(f"Project {project.key} not found.")
    raise PermissionDeniedError(f"You need {permission} in {project.key} to do this.")


def project_ids_with(user: AnyUser | None, permission: str) -> list[int]:
    """Ids of the projects in which ``user`` holds ``permission``."""
    if user is None or not user.is_authenticated or not user.is_active:
        return []
    if getattr(user, "is_superuser", False):
        return list(Project.objects.values_list("pk", flat=True))
    return [pid for pid, role in _roles(user).items() if permission in ROLE_PERMISSIONS[role]]


def visible_projects(user: AnyUser | None) -> QuerySet[Project]:
    """The projects ``user`` may read."""
    qs = Project.objects.select_related("organization")
    if user is not None and getattr(user, "is_superuser", False) and user.is_active:
        return qs
    return qs.filter(pk__in=project_ids_with(user, TRACKER_READ))


def has_organization_permission(user: AnyUser | None, organization_id: int, permission: str) -> bool:
    """Does ``user`` hold ``permission`` in some project of the organization?"""
    ids = project_ids_with(user, permission)
    return Project.objects.filter(pk__in=ids, organization_id=organization_id).exists()
