"""Projects and members over REST: settings, the write-only credential, memberships."""

from __future__ import annotations

import pytest

from tracker.errors import ValidationError
from tracker.models import ActivityEvent, Membership, Project
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose
from tracker.services.projects import project_update
from tracker.services.skills import skill_version_create
from tracker.trust.crypto import decrypt

BAL = "/api/v1/projects/BAL/"
SECRET = "sk-ant-very-secret-credential-42"


def test_project_detail(project, owner, client_for):
    body = client_for(owner).get(BAL).json()

    assert body["key"] == "BAL"
    assert body["name"] == "Ballet"
    assert body["organization"] == "acme"
    assert body["settings"] == {}
    assert body["has_credential"] is False
    assert "credential" not in body
    assert "credential_encrypted" not in body


def test_project_list_is_paginated(org, users, client_for):
    for number in range(3):
        project = Project.objects.create(organization=org, key=f"PX{number}", name=f"Project {number}")
        Membership.objects.create(project=project, user=users["viewer"], role="viewer")

    body = client_for(users["viewer"]).get("/api/v1/projects/").json()

    assert body["count"] == 4
    assert body["next"] is None
    assert [p["key"] for p in body["results"]] == ["BAL", "PX0", "PX1", "PX2"]


def test_owner_renames_and_describes(project, owner, client_for):
    response = client_for(owner).patch(
        BAL, {"name": "Ballet Core", "description": "The plan."}, format="json"
    )

    assert response.status_code == 200
    assert response.json()["name"] == "Ballet Core"
    project.refresh_from_db()
    assert (project.name, project.description) == ("Ballet Core", "The plan.")
    assert ActivityEvent.objects.filter(verb="project.updated", project=project).exists()


def test_settings_patch_changes_only_the_keys_sent(project, owner, client_for):
    client = client_for(owner)
    client.patch(BAL, {"settings": {"max_rounds": 5, "model": "claude-x"}}, format="json")

    response = client.patch(BAL, {"settings": {"four_eyes": True, "model": None}}, format="json")

    assert response.status_code == 200
    assert response.json()["settings"] == {"max_rounds": 5, "four_eyes": True}
    project.refresh_from_db()
    assert project.settings == {"max_rounds": 5, "four_eyes": True}


def test_credential_is_write_only(project, owner, client_for):
    client = client_for(owner)

    response = client.patch(BAL, {"credential": SECRET}, format="json")

    assert response.status_code == 200
    assert response.json()["has_credential"] is True
    assert SECRET not in response.content.decode()
    project.refresh_from_db()
    assert decrypt(project.credential_encrypted) == SECRET
    assert SECRET not in str(list(ActivityEvent.objects.values_list("data", flat=True)))

    cleared = client.patch(BAL, {"credential": ""}, format="json")

    assert cleared.json()["has_credential"] is False
    project.refresh_from_db()
    assert project.credential_encrypted == ""


def test_credential_is_in_no_response(project, users, make_item, client_for):
    owner = users["owner"]
    client = client_for(owner)
    client.patch(BAL, {"credential": SECRET}, format="json")
    token = Project.objects.get(key="BAL").credential_encrypted
    item = make_item(title="Ticket")
    changeset_propose(
        actor=Actor(user=owner),
        project=project,
        title="T",
        operations=[{"op": "create", "kind": "epic", "fields": {"title": "E"}}],
    )
    skill_version_create(actor=Actor(user=owner), project=project, name="planner", body="# Plan")
    knowledge = client.post(
        "/api/v1/knowledge/", {"kind": "note", "title": "N", "projects": ["BAL"]}, format="json"
    ).json()
    urls = [
        "/api/v1/projects/",
        BAL,
        BAL + "members/",
        BAL + "items/",
        BAL + f"items/{item.key}/",
        BAL + "runnable/",
        BAL + "changesets/",
        BAL + "changesets/1/",
        BAL + "skills/",
        BAL + "skills/planner/",
        "/api/v1/knowledge/",
        f"/api/v1/knowledge/{knowledge['id']}/",
        "/api/schema/",
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        assert SECRET not in response.content.decode(), url
        assert token not in response.content.decode(), url


def test_members_are_listed(project, users, client_for):
    body = client_for(users["viewer"]).get(BAL + "members/").json()

    assert [(m["username"], m["role"]) for m in body["results"]] == [
        ("maintainer", "maintainer"),
        ("member", "member"),
        ("owner", "owner"),
        ("viewer", "viewer"),
    ]


def test_owner_invites_a_user_who_sees_the_project_once_she_accepts(project, users, client_for):
    # Adding a user at once was the security finding of issue 41: nobody joins without accepting.
    refused = client_for(users["owner"]).post(
        BAL + "members/", {"username": "stranger", "role": "member"}, format="json"
    )
    invited = client_for(users["owner"]).post(
        BAL + "invitations/", {"username": "stranger", "role": "member"}, format="json"
    )
    before = client_for(users["stranger"]).get(BAL).status_code
    accepted = client_for(users["stranger"]).post(f"/api/v1/invitations/{invited.json()['id']}/accept/")

    assert refused.status_code == 400
    assert invited.status_code == 201
    assert before == 404
    assert accepted.status_code == 200
    assert accepted.json()["username"] == "stranger"
    assert accepted.json()["role"] == "member"
    assert client_for(users["stranger"]).get(BAL).status_code == 200


def test_owner_changes_a_role(project, users, client_for):
    response = client_for(users["owner"]).post(
        BAL + "members/", {"username": "viewer", "role": "maintainer"}, format="json"
    )

    assert response.status_code == 201
    assert Membership.objects.get(project=project, user=users["viewer"]).role == "maintainer"


def test_removed_member_loses_access(project, users, client_for):
    response = client_for(users["owner"]).delete(BAL + "members/member/")

    assert response.status_code == 204
    assert client_for(users["member"]).get(BAL).status_code == 404
    assert ActivityEvent.objects.filter(verb="membership.removed").exists()


@pytest.mark.parametrize(("username", "status"), [("stranger", 404), ("nobody", 400)])
def test_removing_a_non_member_changes_nothing(project, users, client_for, username, status):
    response = client_for(users["owner"]).delete(BAL + f"members/{username}/")

    assert response.status_code == status
    assert Membership.objects.filter(project=project).count() == 4


def test_project_settings_with_a_nul_are_refused_by_the_service(project, owner):
    with pytest.raises(ValidationError) as refused:
        project_update(actor=Actor(user=owner), project=project, settings={"model": "claude\x00"})
    assert refused.value.errors == {"settings.model": ["NUL characters are not allowed."]}
    project.refresh_from_db()
    assert project.settings == {}
