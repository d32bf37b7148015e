"""Which references a chat names exist and may be read: ``/projects/{key}/refs/``."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from knowledge.services import knowledge_create
from planner.domain.services.sessions import session_create
from tests.factories import MembershipFactory, ProjectFactory
from tracker.models import Role
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose


@pytest.fixture
def sibling(org, owner):
    """A project of the same organization that only the owner reads."""
    sibling = ProjectFactory(organization=org, key="SIB", name="Sibling")
    MembershipFactory(project=sibling, user=owner, role=Role.OWNER)
    return sibling


def refs(client: Client, user: Any, query: str, key: str = "BAL") -> Any:
    client.force_login(user)
    return client.get(f"/projects/{key}/refs/?{query}")


def propose(project: Any, user: Any, title: str) -> Any:
    return changeset_propose(
        actor=Actor(user=user),
        project=project,
        title=title,
        operations=[{"op": "create", "kind": "ticket", "fields": {"title": "New"}}],
    )


def test_only_the_items_the_reader_can_read_come_back_with_their_pages(
    client, viewer, make_item, sibling, other_project
):
    login = make_item(title="Login page", state="ready")
    hidden = make_item(title="Sibling's", target=sibling)
    foreign = make_item(title="Other org's", target=other_project)

    query = f"items={login.key},{hidden.key},{foreign.key},BAL-999,bal-1,BAL-x,BAL-99999999999"
    body = refs(client, viewer, query).json()

    assert body["items"] == {
        login.key: {"url": f"/projects/BAL/items/{login.key}/", "title": "Login page", "state": "ready"}
    }
    assert body["changesets"] == {}
    assert body["knowledge"] == {}


def test_items_of_other_projects_the_reader_reads_link_to_their_project(client, owner, make_item, sibling):
    there = make_item(title="There", target=sibling)
    body = refs(client, owner, f"items={there.key}").json()
    assert body["items"][there.key]["url"] == f"/projects/SIB/items/{there.key}/"


def test_changesets_of_this_project_only(client, viewer, member, project, owner, sibling):
    mine = propose(project, member, "Split the login")
    elsewhere = propose(sibling, owner, "Elsewhere")
    assert elsewhere.number == mine.number  # numbered per project

    body = refs(client, viewer, f"changesets={mine.number},#{mine.number},12,0,-1,x").json()

    assert body["changesets"] == {
        str(mine.number): {
            "url": f"/projects/BAL/changesets/{mine.number}/",
            "title": "Split the login",
            "status": "proposed",
        }
    }


def test_knowledge_linked_to_a_project_the_reader_cannot_read_is_absent(
    client, viewer, owner, project, sibling
):
    shared = knowledge_create(actor=Actor(user=owner), kind="note", title="Shared", projects=[project])
    both = knowledge_create(actor=Actor(user=owner), kind="note", title="Both", projects=[project, sibling])

    body = refs(client, viewer, f"knowledge={shared.pk},{both.pk},{both.pk + 1000}").json()

    assert body["knowledge"] == {
        str(shared.pk): {"url": f"/projects/BAL/knowledge/{shared.pk}/", "title": "Shared"}
    }
    assert str(both.pk) in refs(client, owner, f"knowledge={both.pk}").json()["knowledge"]


@pytest.mark.parametrize("who", ["stranger", None])
def test_a_non_member_gets_404_and_an_anonymous_visitor_is_sent_to_sign_in(client, users, who):
    if who is None:
        response = client.get("/projects/BAL/refs/?items=BAL-1")
        assert response.status_code == 302
        return
    assert refs(client, users[who], "items=BAL-1").status_code == 404
    assert refs(client, users["owner"], "items=BAL-1", key="NOPE").status_code == 404


def test_bad_input_is_ignored_never_an_error(client, viewer, make_item):
    item = make_item()
    many = ",".join(f"BAL-{n}" for n in range(1, 500))
    for query in [
        "",
        "items=&changesets=&knowledge=",
        "items=%00,BAL-1%00&changesets=%00&knowledge=99999999999999999999999",
        f"items={many}&changesets={'1,' * 5000}&knowledge={'x' * 100000}",
        "items=BAL-1&items=BAL-2",
    ]:
        response = refs(client, viewer, query)
        assert response.status_code == 200, query
        assert set(response.json()) == {"items", "changesets", "knowledge", "code"}
    assert item.key in refs(client, viewer, f"items={many}").json()["items"]


def test_at_most_200_of_a_kind_are_resolved_in_a_bounded_number_of_queries(
    client, viewer, make_item, django_assert_max_num_queries
):
    items = [make_item(title=f"T{n}") for n in range(3)]
    client.force_login(viewer)
    keys = ",".join([*(i.key for i in items), *(f"BAL-{n}" for n in range(10, 400))])
    with django_assert_max_num_queries(12):
        body = client.get(f"/projects/BAL/refs/?items={keys}&changesets=1,2&knowledge=1,2").json()
    assert set(body["items"]) == {i.key for i in items}
    late = make_item(title="Late")  # BAL-4, named after 200 others: left out
    first = ",".join(f"BAL-{n}" for n in range(100, 300))
    assert refs(client, viewer, f"items={first},{late.key}").json()["items"] == {}


def test_the_chat_page_offers_apply_and_reject_only_to_holders_of_changeset_apply(
    client, chat_project, users
):
    """A maintainer's chat carries what its cards' Apply and Reject need; a member's does not (and
    the REST API would refuse them: the page only spares them buttons that cannot work)."""
    for role, can_apply in [("maintainer", True), ("owner", True), ("member", False)]:
        session = session_create(user=users[role], project=chat_project)
        client.force_login(users[role])
        page = client.get(f"/projects/BAL/chat/{session.pk}/").content.decode()
        assert 'data-refs-url="/projects/BAL/refs/"' in page
        assert ('data-can-apply="true"' in page) is can_apply, role
        assert ('data-changesets-api="/api/v1/projects/BAL/changesets/"' in page) is can_apply, role
        assert 'data-csrf="' in page  # every owner publishes their knowledge drafts
