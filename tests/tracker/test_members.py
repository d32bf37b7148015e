"""``/projects/{key}/members/``: an owner's page of members, invitations and agents; the invited
user's accept and decline forms on the home page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from tests.factories import make_membership, make_project, make_user
from tracker.models import Agent, ApiKey, Invitation, InvitationStatus, Membership, Notice, Role
from tracker.services.activity import Actor
from tracker.services.members import agent_create, invitation_create

pytestmark = pytest.mark.django_db
PAGE = "/projects/BAL/members/"


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def once(client: Client) -> str:
    found = re.search(r'name="once" value="([^"]+)"', client.get(PAGE).content.decode())
    assert found
    return found.group(1)


def test_an_owner_sees_members_invitations_and_agents_with_csp_and_no_store(owner, project):
    alice = make_user(username="alice")
    invitation_create(actor=Actor(user=owner), project=project, username="alice", role="viewer")
    agent_create(actor=Actor(user=owner), project=project, name="CI bot", scopes=["read", "work"])

    page = signed_in(owner).get(PAGE)

    assert page.status_code == 200
    assert "default-src 'none'" in page["Content-Security-Policy"]
    assert page["Cache-Control"] == "no-store"
    assertContains(page, '<th scope="row">owner (you)</th>', html=True)
    assertContains(page, alice.username)
    assertContains(page, "Pending invitations")
    assertContains(page, "ci-bot")
    assertContains(page, "read, work")


@pytest.mark.parametrize(
    ("who", "status"), [("viewer", 403), ("member", 403), ("maintainer", 403), ("stranger", 404)]
)
def test_only_owners_open_the_page_or_post_its_forms(users, project, who, status):
    client = signed_in(users[who])

    assert client.get(PAGE).status_code == status
    assert client.post(f"{PAGE}invite/", {"who": "stranger", "role": "member"}).status_code == status
    assert client.post(f"{PAGE}role/", {"username": "viewer", "role": "owner"}).status_code == status
    assert client.post(f"{PAGE}remove/", {"username": "viewer"}).status_code == status
    assert client.post("/projects/BAL/agents/", {"name": "x", "scopes": ["read"]}).status_code == status
    assert Membership.objects.get(user=users["viewer"], project=project).role == Role.VIEWER
    assert not Invitation.objects.exists()
    assert not Agent.objects.exists()


def test_an_owner_of_another_organization_gets_404(project):
    far = make_user(username="far")
    make_membership(project=make_project(key="FAR"), user=far, role=Role.OWNER)

    assert signed_in(far).get(PAGE).status_code == 404


def test_invite_by_email_then_accept_on_the_home_page(owner, project):
    alice = make_user(username="alice", email="alice@example.com")
    sent = signed_in(owner).post(f"{PAGE}invite/", {"who": "ALICE@example.com", "role": "member"})
    assert sent.status_code == 302
    invitation = Invitation.objects.get(user=alice)
    home = signed_in(alice).get("/")
    assertContains(home, "Invitations")
    assertContains(home, f'action="/invitations/{invitation.pk}/accept/"')

    accepted = signed_in(alice).post(f"/invitations/{invitation.pk}/accept/")

    assert accepted.status_code == 302
    assert accepted["Location"] == "/projects/BAL/"
    assert Membership.objects.get(user=alice, project=project).role == Role.MEMBER
    assertNotContains(signed_in(alice).get("/"), f"/invitations/{invitation.pk}/accept/")


def test_declining_on_the_page_and_someone_elses_invitation_is_404(owner, member, project):
    alice = make_user(username="alice")
    invitation = invitation_create(actor=Actor(user=owner), project=project, username="alice", role="member")

    assert signed_in(member).post(f"/invitations/{invitation.pk}/accept/").status_code == 404
    assert signed_in(alice).post(f"/invitations/{invitation.pk}/decline/").status_code == 302
    assert Invitation.objects.get(pk=invitation.pk).status == InvitationStatus.DECLINED
    assert not Membership.objects.filter(user=alice, project=project).exists()


@pytest.mark.parametrize("who", ["nobody", "owner", "member", "x" * 300, "a\x00b"])
def test_a_bad_invitation_shows_the_form_with_its_error(owner, project, who):
    page = signed_in(owner).post(f"{PAGE}invite/", {"who": who, "role": "member"})

    assert page.status_code == 200
    assertContains(page, 'class="field-error"')
    assert not Invitation.objects.exists()


def test_role_change_and_removal_keep_an_owner(owner, member, project):
    client = signed_in(owner)

    client.post(f"{PAGE}role/", {"username": "member", "role": "maintainer"})
    demoted = client.post(f"{PAGE}role/", {"username": "owner", "role": "member"}, follow=True)
    removed = client.post(f"{PAGE}remove/", {"username": "member"}, follow=True)
    stranger = client.post(f"{PAGE}role/", {"username": "stranger", "role": "member"}, follow=True)

    assertContains(demoted, "last owner")
    assertContains(removed, "Removed member from BAL.")
    assertContains(stranger, "nobody joins a project without accepting")
    assert not Membership.objects.filter(user=member, project=project).exists()
    assert not Membership.objects.filter(user__username="stranger").exists()
    assert Membership.objects.get(user=owner, project=project).role == Role.OWNER


def test_a_new_agent_shows_its_key_once_with_an_mcp_snippet(owner, project):
    client = signed_in(owner)
    value = once(client)

    made = client.post(
        "/projects/BAL/agents/",
        {"name": "CI bot", "scopes": ["read", "work"], "role": "member", "once": value},
    )
    again = client.post(
        "/projects/BAL/agents/", {"name": "CI bot", "scopes": ["read"], "role": "member", "once": value}
    )

    assert made.status_code == 200
    assert made["Cache-Control"] == "no-store"
    assert "default-src 'none'" in made["Content-Security-Policy"]
    secret = re.search(r'value="(ballet_[A-Za-z0-9]{12}\.[A-Za-z0-9]{40})"', made.content.decode())
    assert secret
    assertContains(made, "mcpServers")
    assertContains(made, "data-copy-target")
    assert again.status_code == 302
    assert Agent.objects.count() == 1
    assertNotContains(client.get(PAGE), secret.group(1))


def test_an_owner_revokes_an_agents_key_and_its_holder_gets_a_notice(owner, member, project):
    _, key, _ = agent_create(actor=Actor(user=owner), project=project, name="bot", scopes=["read"])
    client = signed_in(owner)

    revoked = client.post(f"/projects/BAL/agents/keys/{key.pk}/revoke/")

    assert revoked.status_code == 302
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None
    assert Notice.objects.filter(kind="key_revoked", user=key.user).count() == 1
    assert signed_in(member).post(f"/projects/BAL/agents/keys/{key.pk}/revoke/").status_code == 403
