"""Invitations: an owner invites by username or e-mail, the user accepts or declines; nobody joins a
project without accepting (REST and services)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.factories import make_key, make_membership, make_project, make_user
from tracker.errors import InvalidStateError, NotFoundError, ValidationError
from tracker.models import ActivityEvent, Invitation, InvitationStatus, Membership, Notice, Role
from tracker.services.activity import Actor
from tracker.services.members import (
    agent_create,
    invitation_accept,
    invitation_cancel,
    invitation_create,
    invitation_decline,
)

pytestmark = pytest.mark.django_db
INVITATIONS = "/api/v1/projects/BAL/invitations/"


def session(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def alice(db):
    return make_user(username="Alice", email="Alice@Example.com")


def invite(owner: Any, project: Any, **who: Any) -> Invitation:
    return invitation_create(actor=Actor(user=owner), project=project, role=who.pop("role", "member"), **who)


def test_an_invitation_by_email_is_case_insensitive_and_tells_the_invited_user(owner, project, alice):
    response = session(owner).post(
        INVITATIONS, {"email": "alice@EXAMPLE.com", "role": "viewer"}, format="json"
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["username"], body["role"], body["status"], body["invited_by"]) == (
        "Alice",
        "viewer",
        "pending",
        "owner",
    )
    notice = Notice.objects.get(user=alice)
    assert (notice.kind, notice.url, notice.project) == ("invitation", "/inbox/", project)
    assert "BAL" in notice.title
    assert ActivityEvent.objects.filter(verb="invitation.created", target="user:Alice").exists()
    assert session(owner).get(INVITATIONS).json()["results"][0]["id"] == body["id"]


def test_accepting_makes_a_member_with_the_role_and_again_changes_nothing(owner, project, alice):
    invitation = invite(owner, project, username="alice", role="maintainer")
    client = session(alice)

    first = client.post(f"/api/v1/invitations/{invitation.pk}/accept/")
    again = client.post(f"/api/v1/invitations/{invitation.pk}/accept/")

    assert first.status_code == 200
    assert again.status_code == 200
    assert first.json()["role"] == "maintainer"
    assert Membership.objects.get(user=alice, project=project).role == Role.MAINTAINER
    assert Invitation.objects.get(pk=invitation.pk).status == InvitationStatus.ACCEPTED
    assert ActivityEvent.objects.filter(verb="invitation.accepted").count() == 1
    assert client.get("/api/v1/projects/BAL/").status_code == 200


def test_declining_makes_no_member_and_accepting_after_is_refused(owner, project, alice):
    invitation = invite(owner, project, username="Alice")
    client = session(alice)

    declined = client.post(f"/api/v1/invitations/{invitation.pk}/decline/")
    accepted = client.post(f"/api/v1/invitations/{invitation.pk}/accept/")

    assert declined.status_code == 200
    assert declined.json()["status"] == "declined"
    assert accepted.status_code == 409
    assert "declined" in accepted.json()["error"]["message"]
    assert not Membership.objects.filter(user=alice, project=project).exists()


def test_a_cancelled_invitation_cannot_be_accepted(owner, project, alice):
    invitation = invite(owner, project, username="Alice")

    cancelled = session(owner).delete(f"{INVITATIONS}{invitation.pk}/")
    again = session(owner).delete(f"{INVITATIONS}{invitation.pk}/")
    accepted = session(alice).post(f"/api/v1/invitations/{invitation.pk}/accept/")

    assert (cancelled.status_code, again.status_code) == (204, 204)
    assert accepted.status_code == 409
    assert "cancelled" in accepted.json()["error"]["message"]
    assert not Membership.objects.filter(user=alice, project=project).exists()


@pytest.mark.parametrize("who", ["owner", "member", "stranger"])
def test_only_the_invited_user_accepts_or_declines_others_get_404(users, owner, project, alice, who):
    invitation = invite(owner, project, username="Alice")

    for action in ("accept", "decline"):
        response = session(users[who]).post(f"/api/v1/invitations/{invitation.pk}/{action}/")
        assert response.status_code == 404
    assert Invitation.objects.get(pk=invitation.pk).status == InvitationStatus.PENDING
    assert session(alice).post("/api/v1/invitations/999999/accept/").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"username": "nobody", "role": "member"}, "username"),
        ({"email": "nobody@example.com", "role": "member"}, "email"),
        ({"username": "owner", "role": "member"}, "username"),  # oneself
        ({"username": "member", "role": "member"}, "username"),  # a member already
        ({"username": "Alice\x00", "role": "member"}, "username"),
        ({"username": "A" * 151, "role": "member"}, "username"),
        ({"username": 12, "role": "member"}, "username"),
        ({"username": "Alice", "role": "emperor"}, "role"),
        ({"username": "Alice", "email": "alice@example.com", "role": "member"}, "username"),
        ({"role": "member"}, "username"),
        ({"username": "Alice", "role": "member", "extra": 1}, "extra"),
        (["Alice"], "non_field_errors"),
    ],
)
def test_bad_invitations_are_field_errors_and_store_nothing(owner, project, alice, body, field):
    response = session(owner).post(INVITATIONS, body, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not Invitation.objects.exists()
    assert not Notice.objects.exists()


def test_an_unknown_inactive_or_agent_user_reads_the_same_no_such_user(owner, project):
    other = make_project(key="ZZZ")
    make_membership(project=other, user=owner, role=Role.OWNER)
    agent, _, _ = agent_create(actor=Actor(user=owner), project=other, name="bot", scopes=["read"])
    inactive = make_user(username="gone", is_active=False)
    client = session(owner)

    answers = [
        client.post(INVITATIONS, {"username": name, "role": "member"}, format="json")
        for name in ("ghost", inactive.username, agent.user.username)
    ]

    assert [answer.json()["error"]["fields"]["username"] for answer in answers] == [["No such user."]] * 3
    assert not Invitation.objects.exists()


def test_inviting_twice_is_refused(owner, project, alice):
    invite(owner, project, username="Alice")

    with pytest.raises(ValidationError, match="pending invitation"):
        invite(owner, project, username="Alice")


def test_a_user_of_another_organization_is_invited_never_added(owner, project):
    outsider = make_user(username="outsider")
    make_membership(project=make_project(key="FAR"), user=outsider, role=Role.OWNER)

    invitation = invite(owner, project, username="outsider")

    assert invitation.status == InvitationStatus.PENDING
    assert not Membership.objects.filter(user=outsider, project=project).exists()


@pytest.mark.parametrize(
    ("who", "status"), [("viewer", 403), ("member", 403), ("maintainer", 403), ("stranger", 404)]
)
def test_only_owners_invite_list_and_cancel(users, owner, project, alice, who, status):
    invitation = invite(owner, project, username="Alice")
    client = session(users[who])

    assert client.get(INVITATIONS).status_code == status
    assert (
        client.post(INVITATIONS, {"username": "Alice", "role": "member"}, format="json").status_code == status
    )
    assert client.delete(f"{INVITATIONS}{invitation.pk}/").status_code == status
    assert Invitation.objects.get(pk=invitation.pk).status == InvitationStatus.PENDING


def test_an_owner_of_another_project_cannot_cancel_this_projects_invitation(owner, project, alice):
    other_owner = make_user(username="other-owner")
    other = make_project(key="OTH2")
    make_membership(project=other, user=other_owner, role=Role.OWNER)
    invitation = invite(owner, project, username="Alice")

    with pytest.raises(NotFoundError):
        invitation_cancel(actor=Actor(user=other_owner), project=other, invitation_id=invitation.pk)
    assert session(other_owner).delete(f"{INVITATIONS}{invitation.pk}/").status_code == 404


def test_someone_removed_after_accepting_reads_a_readable_error_on_retry(owner, project, alice):
    invitation = invite(owner, project, username="Alice")
    invitation_accept(user=alice, invitation=invitation)
    Membership.objects.filter(user=alice, project=project).delete()

    with pytest.raises(InvalidStateError, match="removed"):
        invitation_accept(user=alice, invitation=invitation)
    with pytest.raises(InvalidStateError, match="accepted"):
        invitation_decline(user=alice, invitation=invitation)
    assert session(alice).get("/api/v1/projects/BAL/").status_code == 404


def test_no_api_key_manages_invitations(owner, project, alice):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_key(owner)}")

    response = client.post(INVITATIONS, {"username": "Alice", "role": "member"}, format="json")

    assert response.status_code == 403
    assert not Invitation.objects.exists()
