"""The one access check: roles grant permissions in a project.

REST, admin, pages, WebSocket and planner tools all ask :func:`has_permission`
(or :func:`require`, which raises). Someone who cannot read a project is told
it does not exist. Access is read from the database for the request, frame or
tool call at hand (:func:`access_scope`), never cached on a user object: a
member removed, demoted, deactivated a moment ago has lost access now.

Where several people see what is done (a question's shared sub-chat), it is done
as a :class:`Reader`: with what every one of them may do, within one project.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from tracker.db import sql
from tracker.errors import NotFoundError, PermissionDeniedError
from tracker.models import Project, Role

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
# Roles from least to most: each grants all the permissions of those before it.
ROLES_ASCENDING: Final = (Role.VIEWER, Role.MEMBER, Role.MAINTAINER, Role.OWNER)


@dataclass(frozen=True)
class Reader:
    """Several users at once: what every one of them may do, and, with ``project_id``, only in that
    project, as if each held that project's membership alone (a question's sub-chat, which all of a
    project's members see: nothing done there may reach beyond the project or its least-entitled
    reader). Their access is read afresh, like a user's."""

    users: tuple[User, ...]
    project_id: int | None = None


# A user's id stands for the user where no user object is held (the event loop's waits): their
# access is read from the database all the same.
Principal = AnyUser | Reader | int


@dataclass(frozen=True)
class Access:
    """What a user may do right now: read from the database, never from a user object that may
    have outlived a change (a socket's user, a turn's)."""

    active: bool
    superuser: bool
    roles: dict[int, str]  # role per project id


NO_ACCESS: Final = Access(active=False, superuser=False, roles={})

# Access read within the current request, frame or tool call; None outside one (no caching).
_scope: ContextVar[dict[int, Access] | None] = ContextVar("ballet_access", default=None)


@contextmanager
def access_scope(*, within: bool = False) -> Iterator[None]:
    """Read each user's access at most once inside: around one request, frame or tool call.
    ``within``: inside the scope already open, if one is (a round of tool calls made at once)."""
    if within and _scope.get() is not None:
        yield
        return
    token = _scope.set({})
    try:
        yield
    finally:
        _scope.reset(token)


_ACCESS_SQL = (
    "SELECT u.id, u.is_active, u.is_superuser, m.project_id, m.role FROM auth_user u"
    " LEFT JOIN tracker_membership m ON m.user_id = u.id WHERE u.id IN ({ids})"
)


def access_load(user_ids: Iterable[int]) -> dict[int, Access]:
    """The access of several users in one query (unknown ids have none); kept in the scope."""
    ids = sorted(set(user_ids))
    # Read on every round of tool calls and every chat frame (docs/architecture.md#the-hot-path-in-sql).
    return access_loaded(ids, sql.rows(*access_query(ids)) if ids else [])


def access_query(user_ids: Iterable[int]) -> sql.Statement:
    """The statement :func:`access_load` runs, for a caller that sends it with statements of its
    own (one round trip); hand its rows to :func:`access_loaded`."""
    ids = sorted(set(user_ids))
    return _ACCESS_SQL.format(ids=sql.placeholders(len(ids))), ids


def access_loaded(user_ids: Iterable[int], rows: Iterable[sql.Row]) -> dict[int, Access]:
    """The access of ``user_ids`` from the rows of their :func:`access_query`; kept in the scope."""
    ids = sorted(set(user_ids))
    found: dict[int, Access] = {}
    for pk, active, superuser, project_id, role in rows:
        access = found.setdefault(pk, Access(active=bool(active), superuser=bool(superuser), roles={}))
        if project_id is not None:
            access.roles[project_id] = role
    loaded = {pk: found.get(pk, NO_ACCESS) for pk in ids}
    cache = _scope.get()
    if cache is not None:
        cache.update(loaded)
    return loaded


# Where an API key bound to projects leaves its mark on the user object the request carries.
_BOUND: Final = "_ballet_key_projects"


def key_bind(user: User, project_ids: Iterable[int]) -> User:
    """``user`` as the API key that authenticated the request holds them: bound to
    ``project_ids``, they act only there, as if no other project existed (each request loads its
    own user object, so the binding lives as long as the request). No ids: unbound."""
    bound = frozenset(project_ids)
    if bound:
        setattr(user, _BOUND, bound)
    return user


def key_bound(user: Principal | None) -> frozenset[int] | None:
    """The projects the request's key binds ``user`` to; None: unbound."""
    return getattr(user, _BOUND, None) if isinstance(user, User) else None


def access_of(user: Principal | None) -> Access:
    """``user``'s access now (once per scope), within the projects its key is bound to."""
    if isinstance(user, Reader):
        return _joint_access(user)
    if isinstance(user, int):
        pk = user
    elif user is None or not user.is_authenticated or user.pk is None or not user.is_active:
        return NO_ACCESS
    else:
        pk = user.pk
    cache = _scope.get()
    access = cache[pk] if cache is not None and pk in cache else access_load([pk])[pk]
    bound = key_bound(user)
    return access if bound is None else _within(access, bound)


def _within(access: Access, bound: frozenset[int]) -> Access:
    """``access`` within the projects ``bound``: a superuser counts as an owner there."""
    if not access.active:
        return access
    if access.superuser:
        return Access(active=True, superuser=False, roles=dict.fromkeys(bound, Role.OWNER))
    return Access(
        active=True, superuser=False, roles={pid: r for pid, r in access.roles.items() if pid in bound}
    )


def _joint_access(reader: Reader) -> Access:
    """The access every user of ``reader`` holds, within its project if it has one: per project
    the least of their roles (a superuser counts as an owner there)."""
    each = [access_of(user) for user in reader.users]
    if not each or not all(access.active for access in each):
        return NO_ACCESS
    if reader.project_id is None and all(access.superuser for access in each):
        return Access(active=True, superuser=True, roles={})
    if reader.project_id is not None:
        project_ids = {reader.project_id}
    else:
        project_ids = {pid for access in each for pid in access.roles}
    roles: dict[int, str] = {}
    for pid in project_ids:
        held = [Role.OWNER if access.superuser else access.roles.get(pid, "") for access in each]
        if all(held):
            roles[pid] = min(held, key=lambda role: ROLES_ASCENDING.index(Role(role)))
    return Access(active=True, superuser=False, roles=roles)


def permissions_for(user: Principal | None, project_id: int) -> frozenset[str]:
    """Every permission ``user`` holds in the project."""
    access = access_of(user)
    if not access.active:
        return frozenset()
    if access.superuser:
        return ALL_PERMISSIONS
    role = access.roles.get(project_id)
    return ROLE_PERMISSIONS.get(role, frozenset()) if role else frozenset()


def is_superuser(user: Principal | None) -> bool:
    """An active superuser, now."""
    access = access_of(user)
    return access.active and access.superuser


def has_permission(user: Principal | None, project: Project | int, permission: str) -> bool:
    """The one check: does ``user`` hold ``permission`` in ``project``?"""
    if permission not in ALL_PERMISSIONS:
        raise ValueError(f"unknown permission {permission!r}")
    project_id = project if isinstance(project, int) else project.pk
    return permission in permissions_for(user, project_id)


def require(user: Principal | None, project: Project, permission: str) -> None:
    """Raise unless ``user`` holds ``permission``; hide projects the user cannot read."""
    if has_permission(user, project, permission):
        return
    if not has_permission(user, project, TRACKER_READ):
        raise NotFoundError(f"Project {project.key} not found.")
    raise PermissionDeniedError(f"You need {permission} in {project.key} to do this.")


def project_ids_with(user: Principal | None, permission: str) -> list[int]:
    """Ids of the projects in which ``user`` holds ``permission``."""
    access = access_of(user)
    if not access.active:
        return []
    if access.superuser:
        return list(Project.objects.values_list("pk", flat=True))
    return [pid for pid, role in access.roles.items() if permission in ROLE_PERMISSIONS[role]]


def visible_projects(user: Principal | None) -> QuerySet[Project]:
    """The projects ``user`` may read."""
    qs = Project.objects.select_related("organization")
    if is_superuser(user):
        return qs
    return qs.filter(pk__in=project_ids_with(user, TRACKER_READ))


def has_organization_permission(user: Principal | None, organization_id: int, permission: str) -> bool:
    """Does ``user`` hold ``permission`` in some project of the organization?"""
    ids = project_ids_with(user, permission)
    return Project.objects.filter(pk__in=ids, organization_id=organization_id).exists()
