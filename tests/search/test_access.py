"""Search returns only what the caller may read: nothing of another project or organization."""

from __future__ import annotations

import pytest

from knowledge.search import knowledge_search
from knowledge.services import knowledge_create
from tests.factories import make_membership, make_project, make_user
from tests.planner.test_tools import ok
from tracker.search import project_search
from tracker.services.activity import Actor
from tracker.services.skills import skill_version_create


@pytest.fixture
def world(project, other_project, owner, make_item, indexed):
    """The same words in BAL, in a sibling project of its organization, and in another organization."""
    sibling = make_project(organization=project.organization, key="SIB")
    outsider = make_user(username="outsider")
    make_membership(project=other_project, user=outsider, role="owner")
    make_membership(project=sibling, user=owner, role="owner")
    with indexed():
        mine = make_item(title="Billing webhook retries")
        make_item(title="Billing webhook retries", target=sibling)
        make_item(title="Billing webhook retries", target=other_project)
        skill_version_create(
            actor=Actor(user=owner), project=sibling, name="billing-webhooks", body="Billing"
        )
        skill_version_create(
            actor=Actor(user=outsider), project=other_project, name="billing-guide", body="Billing webhook"
        )
        knowledge_create(
            actor=Actor(user=outsider), kind="note", title="Billing webhook notes", projects=[other_project]
        )
    return {"mine": mine, "sibling": sibling}


def test_project_search_sees_only_the_project_and_its_organization(project, world):
    hits = project_search(project=project, query="billing webhook")
    assert [(h.kind, h.key) for h in hits] == [("item", world["mine"].key)]


def test_knowledge_search_sees_only_the_organization(project, other_project, world):
    assert knowledge_search(organization_id=project.organization_id, query="billing webhook") == []
    assert [
        h.title for h in knowledge_search(organization_id=other_project.organization_id, query="billing")
    ] == ["Billing webhook notes"]


def test_an_organization_skill_is_shadowed_by_the_project_skill_of_its_name(project, owner, indexed):
    with indexed():
        skill_version_create(
            actor=Actor(user=owner),
            project=project,
            name="triage",
            body="Org triage rules",
            organization_scope=True,
        )
        skill_version_create(
            actor=Actor(user=owner), project=project, name="triage", body="Project triage rules"
        )
    hits = project_search(project=project, query="triage rules")
    assert [(h.key, h.snippet) for h in hits] == [("triage", "Project **triage** **rules**")]


def test_planner_and_rest_search_hide_other_projects(project, member, viewer, users, world, client_for):
    found = ok(member, project, "search_project", {"query": "billing webhook"})["results"]
    assert [r["key"] for r in found] == [world["mine"].key]
    assert ok(member, project, "search_knowledge", {"query": "billing webhook"})["results"] == []
    response = client_for(users["stranger"]).get("/api/v1/projects/BAL/search/", {"q": "billing"})
    assert response.status_code == 404
    response = client_for(viewer).get("/api/v1/projects/OTH/search/", {"q": "billing"})
    assert response.status_code == 404
    titles = [
        e["title"] for e in client_for(viewer).get("/api/v1/knowledge/", {"q": "billing"}).json()["results"]
    ]
    assert titles == []
