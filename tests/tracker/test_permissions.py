"""The one permission check: the role table, superusers, strangers, inactive users."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser

from tests.factories import MembershipFactory, ProjectFactory, make_user
from tracker.errors import NotFoundError, PermissionDeniedError
from tracker.trust.permissions import (
    ALL_PERMISSIONS,
    Reader,
    has_permission,
    project_ids_with,
    require,
    visible_projects,
)

EXPECTED = {
    "viewer": {"tracker.read", "skill.read", "knowledge.read"},
    "member": {
        "tracker.read",
        "skill.read",
        "knowledge.read",
        "tracker.write",
        "knowledge.write",
        "planner.chat",
    },
    "maintainer": {
        "tracker.read",
        "skill.read",
        "knowledge.read",
        "tracker.write",
        "knowledge.write",
        "planner.chat",
        "changeset.apply",
        "policy.set",
        "skill.write",
    },
}
EXPECTED["owner"] = EXPECTED["maintainer"] | {"project.admin"}


@pytest.mark.parametrize("role", ["viewer", "member", "maintainer", "owner"])
@pytest.mark.parametrize("permission", sorted(ALL_PERMISSIONS))
def test_role_table(project, users, role, permission):
    assert has_permission(users[role], project, permission) is (permission in EXPECTED[role])


def test_superuser_holds_everything(project):
    admin = make_user(username="root", is_superuser=True)
    assert all(has_permission(admin, project, p) for p in ALL_PERMISSIONS)
    assert list(visible_projects(admin)) == [project]


def test_strangers_anonymous_and_inactive_hold_nothing(project, users):
    inactive = users["owner"]
    inactive.is_active = False
    for user in (users["stranger"], AnonymousUser(), None, inactive):
        assert not any(has_permission(user, project, p) for p in ALL_PERMISSIONS)


def test_require_hides_unreadable_projects_and_refuses_missing_permissions(project, users):
    with pytest.raises(NotFoundError):
        require(users["stranger"], project, "tracker.write")
    with pytest.raises(PermissionDeniedError):
        require(users["viewer"], project, "tracker.write")
    require(users["member"], project, "tracker.write")


def test_visible_projects_lists_only_memberships(project, other_project, users):
    assert list(visible_projects(users["viewer"])) == [project]
    assert list(visible_projects(users["stranger"])) == []


def test_unknown_permission_is_a_programming_error(project, users):
    with pytest.raises(ValueError, match="unknown permission"):
        has_permission(users["owner"], project, "tracker.delete")


@pytest.fixture
def elsewhere(org):
    """Another project of the organization."""
    return ProjectFactory(organization=org, key="SEC")


def test_a_reader_holds_what_all_its_users_hold_within_its_project(project, elsewhere, users, superuser):
    MembershipFactory(project=elsewhere, user=users["owner"], role="owner")
    MembershipFactory(project=elsewhere, user=users["member"], role="member")
    both = Reader(users=(users["owner"], users["member"]))
    assert has_permission(both, project, "knowledge.write")
    assert not has_permission(both, project, "changeset.apply")  # the member's role is the lesser
    assert has_permission(both, elsewhere, "tracker.write")
    confined = Reader(users=(users["owner"], users["member"]), project_id=project.pk)
    assert not has_permission(confined, elsewhere, "tracker.read")  # as if BAL were their only project
    assert sorted(project_ids_with(confined, "knowledge.read")) == [project.pk]
    assert list(visible_projects(confined)) == [project]
    root_alone = Reader(users=(superuser,), project_id=project.pk)
    assert has_permission(root_alone, project, "project.admin")
    assert not has_permission(root_alone, elsewhere, "tracker.read")
    with_stranger = Reader(users=(users["owner"], users["stranger"]), project_id=project.pk)
    assert not has_permission(with_stranger, project, "tracker.read")
    users["member"].is_active = False
    users["member"].save(update_fields=["is_active"])
    assert not has_permission(Reader(users=(users["owner"], users["member"])), project, "tracker.read")
