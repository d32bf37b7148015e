"""The security finding of issue 41: an owner of any project could add any user as a member without
her consent, then list and revoke her API keys (names, scopes, last use), cutting off her agents in
projects he cannot read. Nobody joins a project without accepting, and a project's owner sees and
revokes only the keys bound to that project."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.factories import make_membership, make_project, make_user
from tracker.models import ApiKey, Invitation, InvitationStatus, Membership, Notice, Role
from tracker.services.keys import key_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def victim(project):
    """A member of BAL with a key for her agents there."""
    user = make_user(username="victim")
    make_membership(project=project, user=user, role=Role.MEMBER)
    return user


@pytest.fixture
def attacker(db):
    """The owner of a project of another organization."""
    user = make_user(username="mallory")
    make_membership(project=make_project(key="EVIL"), user=user, role=Role.OWNER)
    return user


def session(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_an_owner_cannot_add_a_user_without_her_consent(victim, attacker):
    response = session(attacker).post(
        "/api/v1/projects/EVIL/members/", {"username": "victim", "role": "viewer"}, format="json"
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert "invitations/" in error["message"]
    assert "nobody joins a project without accepting" in error["fields"]["username"][0]
    assert not Membership.objects.filter(user=victim, project__key="EVIL").exists()


def test_an_invitation_makes_no_member_until_accepted(victim, attacker):
    response = session(attacker).post(
        "/api/v1/projects/EVIL/invitations/", {"username": "victim", "role": "viewer"}, format="json"
    )

    assert response.status_code == 201
    assert Invitation.objects.get(user=victim).status == InvitationStatus.PENDING
    assert not Membership.objects.filter(user=victim, project__key="EVIL").exists()
    assert session(attacker).get("/api/v1/projects/EVIL/keys/").json()["count"] == 0


def test_a_member_keys_are_not_listed_or_revoked_by_another_projects_owner(victim, attacker, project):
    key, _ = key_create(user=victim, name="victim's agent", scopes=["read", "work"])
    # Even once she accepted: her unbound key is hers, not EVIL's.
    make_membership(project=Membership.objects.get(user=attacker).project, user=victim, role=Role.VIEWER)
    client = session(attacker)

    listed = client.get("/api/v1/projects/EVIL/keys/")
    revoked = client.delete(f"/api/v1/projects/EVIL/keys/{key.pk}/")
    page = Client()
    page.force_login(attacker)

    assert listed.status_code == 200
    assert listed.json()["count"] == 0
    assert revoked.status_code == 404
    assert "victim&#x27;s agent" not in page.get("/keys/").content.decode()
    assert "victim's agent" not in page.get("/keys/").content.decode()
    key.refresh_from_db()
    assert key.revoked_at is None


def test_a_bound_key_is_listed_and_revoked_by_the_owner_and_its_holder_is_told(victim, owner, project):
    key, _ = key_create(user=victim, name="BAL agent", scopes=["read"], projects=[project])

    listed = session(owner).get("/api/v1/projects/BAL/keys/").json()["results"]
    revoked = session(owner).delete(f"/api/v1/projects/BAL/keys/{key.pk}/")

    assert [row["name"] for row in listed] == ["BAL agent"]
    assert revoked.status_code == 204
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None
    notice = Notice.objects.get(user=victim)
    assert notice.kind == "key_revoked"
    assert "BAL agent" in notice.title
