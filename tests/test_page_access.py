"""Every page of a project, asked by each kind of caller: its members and viewers read them, a
member of another project of the same organization and a former member get 404 for each (as if
the project did not exist), and only holders of changeset.apply see or use Apply
(docs/trust.md)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from knowledge.services import knowledge_create
from planner.domain.services.sessions import session_create
from tests.factories import make_membership, make_project
from tracker.models import Changeset, ChangesetStatus, Membership
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(project, owner, member, make_item) -> dict[str, Any]:
    ticket = make_item(title="Login form", state="ready")
    entry = knowledge_create(actor=Actor(user=owner), kind="note", title="Cookies", projects=[project])
    changeset = changeset_propose(
        actor=Actor(user=member),
        project=project,
        title="Retitle",
        rationale="",
        operations=[
            {"op": "update", "item": ticket.key, "base_version": ticket.version, "fields": {"title": "In"}}
        ],
    )
    session = session_create(user=member, project=project)
    return {"ticket": ticket, "entry": entry, "changeset": changeset, "session": session}


def pages(world: dict[str, Any]) -> list[str]:
    number = world["changeset"].number
    return [
        "/projects/BAL/",
        "/projects/BAL/?layout=board&view=runnable",
        f"/projects/BAL/items/{world['ticket'].key}/",
        "/projects/BAL/graph.svg",
        "/projects/BAL/knowledge/",
        f"/projects/BAL/knowledge/{world['entry'].pk}/",
        "/projects/BAL/changesets/",
        f"/projects/BAL/changesets/{number}/",
        f"/projects/BAL/refs/?items={world['ticket'].key}&changesets={number}",
        "/projects/BAL/chat/",
        f"/projects/BAL/chat/{world['session'].pk}/",
    ]


def as_user(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


def test_members_and_viewers_read_every_page(client, users, world):
    for role in ("member", "viewer"):
        for url in pages(world):
            if role == "viewer" and "/chat/" in url and url.count("/") > 4:
                continue  # a chat is its owner's: no one else opens it
            assert as_user(client, users[role]).get(url).status_code == 200, (role, url)


def test_a_member_of_another_project_of_the_organization_gets_404_everywhere(client, org, world):
    neighbour = make_project(organization=org, key="NEXT", name="Next door")
    outsider = make_membership(project=neighbour).user
    for url in pages(world):
        assert as_user(client, outsider).get(url).status_code == 404, url
    decide = f"/projects/BAL/changesets/{world['changeset'].number}/decide/"
    assert as_user(client, outsider).post(decide, {"decision": "apply"}).status_code == 404
    assert Changeset.objects.get(pk=world["changeset"].pk).status == ChangesetStatus.PROPOSED


def test_someone_removed_a_minute_ago_gets_404_everywhere(client, users, world):
    viewer = users["viewer"]
    as_user(client, viewer)
    assert client.get("/projects/BAL/").status_code == 200

    Membership.objects.filter(user=viewer).delete()

    for url in pages(world):
        assert client.get(url).status_code == 404, url


def test_only_holders_of_changeset_apply_see_and_use_apply(client, users, world):
    review = f"/projects/BAL/changesets/{world['changeset'].number}/"
    for role, may in (("viewer", False), ("member", False), ("maintainer", True), ("owner", True)):
        html = as_user(client, users[role]).get(review).content.decode()
        assert ("Apply changeset #" in html) is may, role
    for role in ("viewer", "member"):
        refused = as_user(client, users[role]).post(f"{review}decide/", {"decision": "apply"})
        assert refused.status_code == 403, role
    assert Changeset.objects.get(pk=world["changeset"].pk).status == ChangesetStatus.PROPOSED
