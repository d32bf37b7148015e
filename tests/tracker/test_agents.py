"""Agents: an owner makes a user for a coding agent and its key, bound to the project, in one step;
the agent acts only through its keys and never signs in to the pages."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from tests.factories import make_membership, make_user
from tracker.errors import ValidationError
from tracker.models import ActivityEvent, Agent, ApiKey, Membership, Role
from tracker.services.activity import Actor
from tracker.services.members import agent_create, agent_key_create

pytestmark = pytest.mark.django_db
AGENTS = "/api/v1/projects/BAL/agents/"


def session(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def test_an_owner_makes_an_agent_and_its_bound_key_in_one_step(owner, project, other_project):
    response = session(owner).post(AGENTS, {"name": "CI bot", "scopes": ["read", "work"]}, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["username"], body["role"], body["scopes"]) == ("ci-bot", "member", ["read", "work"])
    user = User.objects.get(username="ci-bot")
    assert not user.has_usable_password()
    assert Agent.objects.get(user=user).project == project
    assert Membership.objects.get(user=user, project=project).role == Role.MEMBER
    key = ApiKey.objects.get(user=user)
    assert (list(key.projects.all()), key.created_by) == ([project], owner)
    assert body["key"].startswith(f"ballet_{key.prefix}.")
    assert bearer(body["key"]).get("/api/v1/projects/BAL/items/").status_code == 200
    assert ActivityEvent.objects.filter(verb="agent.created", target="user:ci-bot").exists()
    listed = session(owner).get(AGENTS).json()["results"]
    assert [(row["username"], [k["prefix"] for k in row["keys"]]) for row in listed] == [
        ("ci-bot", [key.prefix])
    ]
    assert "key" not in listed[0]["keys"][0]


def test_agent_usernames_are_made_unique(owner, project):
    made = [
        agent_create(actor=Actor(user=owner), project=project, name="Bot", scopes=["read"]) for _ in range(3)
    ]

    assert [agent.user.username for agent, _, _ in made] == ["bot", "bot-2", "bot-3"]


def test_an_agent_cannot_sign_in_nor_keep_a_session(owner, project):
    agent, _, _ = agent_create(actor=Actor(user=owner), project=project, name="bot", scopes=["read"])
    agent.user.set_password("a-password-someone-set")
    agent.user.save()

    assert authenticate(None, username="bot", password="a-password-someone-set") is None
    login = Client().post("/accounts/login/", {"username": "bot", "password": "a-password-someone-set"})
    assert login.status_code == 200  # the form again, no session
    client = Client()
    client.force_login(agent.user)
    assert client.get("/").status_code == 302  # the session is not honoured: off to the login page
    token = APIClient().post("/api/v1/auth/token/", {"username": "bot", "password": "a-password-someone-set"})
    assert token.status_code == 400


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "", "scopes": ["read"]}, "name"),
        ({"name": "x" * 101, "scopes": ["read"]}, "name"),
        ({"name": "bot\x00", "scopes": ["read"]}, "name"),
        ({"name": 5, "scopes": ["read"]}, "name"),
        ({"name": "bot", "scopes": []}, "scopes"),
        ({"name": "bot", "scopes": ["root"]}, "scopes.0"),
        ({"name": "bot", "scopes": "read"}, "scopes"),
        ({"name": "bot", "scopes": ["read"], "role": "owner"}, "role"),
        ({"name": "bot", "scopes": ["read"], "expires_in_days": 0}, "expires_in_days"),
        ({"name": "bot", "scopes": ["read"], "password": "x"}, "password"),
    ],
)
def test_bad_agents_are_field_errors_and_store_nothing(owner, project, body, field):
    response = session(owner).post(AGENTS, body, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not Agent.objects.exists()
    assert not User.objects.filter(username__startswith="bot").exists()


@pytest.mark.parametrize(
    ("who", "status"), [("viewer", 403), ("member", 403), ("maintainer", 403), ("stranger", 404)]
)
def test_only_owners_make_and_list_agents(users, project, who, status):
    client = session(users[who])

    assert client.get(AGENTS).status_code == status
    assert client.post(AGENTS, {"name": "bot", "scopes": ["read"]}, format="json").status_code == status
    assert not Agent.objects.exists()


def test_an_owner_of_another_project_sees_no_agent_here(owner, project, other_project):
    other_owner = make_user(username="far-owner")
    make_membership(project=other_project, user=other_owner, role=Role.OWNER)
    agent_create(actor=Actor(user=owner), project=project, name="bot", scopes=["read"])

    assert session(other_owner).get(AGENTS).status_code == 404
    assert session(other_owner).get("/api/v1/projects/OTH/agents/").json()["count"] == 0


def test_an_agents_key_is_made_and_revoked_by_the_projects_owner(owner, project):
    agent, _, _ = agent_create(actor=Actor(user=owner), project=project, name="bot", scopes=["read"])
    key, secret = agent_key_create(
        actor=Actor(user=owner), project=project, agent=agent, name="second", scopes=["read"]
    )

    revoked = session(owner).delete(f"/api/v1/projects/BAL/keys/{key.pk}/")

    assert revoked.status_code == 204
    assert bearer(secret).get("/api/v1/projects/").status_code == 401
    with pytest.raises(ValidationError):
        agent_key_create(actor=Actor(user=owner), project=project, agent=agent, name="", scopes=["read"])
