"""Search returns only what the caller may read: nothing of another project or organization."""

from __future__ import annotations

import pytest

from knowledge.search import knowledge_search
from knowledge.selectors import knowledge_find
from knowledge.services import knowledge_create
from tests.factories import make_membership, make_project, make_user
from tests.planner.domain.test_tools import ok
from tracker.models import Role
from tracker.search import project_search
from tracker.selectors import project_find
from tracker.services.activity import Actor
from tracker.services.skills import skill_version_create
from tracker.trust.permissions import ROLE_PERMISSIONS, SKILL_READ


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
        knowledge_create(
            actor=Actor(user=owner), kind="note", title="Billing webhook secrets of SIB", projects=[sibling]
        )
        both = knowledge_create(
            actor=Actor(user=owner),
            kind="note",
            title="Billing webhook plan of BAL and SIB",
            projects=[project, sibling],
        )
        knowledge_create(
            actor=Actor(user=owner),
            kind="note",
            title="Retry budget in BAL",
            body="Also about the billing webhook, among other things.",
            projects=[project],
        )
    return {"mine": mine, "sibling": sibling, "both": both}


def test_project_search_sees_only_the_project_and_its_organization(project, world):
    hits = project_search(project=project, query="billing webhook")
    assert [(h.kind, h.key) for h in hits] == [("item", world["mine"].key)]


def test_knowledge_search_sees_only_what_the_caller_reads(project, other_project, owner, member, world):
    def titles(user, organization_id):
        return sorted(
            h.title for h in knowledge_find(user=user, organization_id=organization_id, query="billing")
        )

    assert titles(member, project.organization_id) == ["Retry budget in BAL"]
    assert titles(owner, project.organization_id) == [
        "Billing webhook plan of BAL and SIB",
        "Billing webhook secrets of SIB",
        "Retry budget in BAL",
    ]
    assert titles(member, other_project.organization_id) == []
    assert titles(owner, other_project.organization_id) == []
    hits = knowledge_search(organization_id=other_project.organization_id, query="billing", hidden=())
    assert [h.title for h in hits] == ["Billing webhook notes"]


def test_hidden_knowledge_does_not_move_the_scores_of_what_is_shown(project, member, world):
    """What the caller cannot read leaves the rankings before fusion: no gap in a score betrays it."""
    everything = knowledge_search(organization_id=project.organization_id, query="billing webhook", hidden=())
    assert everything[0].title != "Retry budget in BAL"  # others outrank it for everyone
    shown = knowledge_find(user=member, organization_id=project.organization_id, query="billing webhook")
    assert [(h.title, h.score) for h in shown] == [("Retry budget in BAL", 1.0)]


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
    response = client_for(users["stranger"]).get("/api/v1/projects/BAL/search/", {"q": "billing"})
    assert response.status_code == 404
    response = client_for(viewer).get("/api/v1/projects/OTH/search/", {"q": "billing"})
    assert response.status_code == 404
    titles = [
        e["title"] for e in client_for(viewer).get("/api/v1/knowledge/", {"q": "billing"}).json()["results"]
    ]
    assert titles == ["Retry budget in BAL"]
    found = ok(member, project, "search_knowledge", {"query": "billing webhook"})["results"]
    assert [r["title"] for r in found] == ["Retry budget in BAL"]
    assert "SIB" not in str(found)


def test_search_leaves_out_skills_for_someone_without_skill_read(
    project, owner, member, make_item, indexed, client_for, monkeypatch
):
    """Every role reads skills today; a role that did not would find the project's items and no skill,
    over REST, through the planner's search_project, and through the selector both call."""
    with indexed():
        make_item(title="Deploy checklist")
        skill_version_create(actor=Actor(user=owner), project=project, name="deploy", body="Deploy checklist")

    def found(user):
        rest = client_for(user).get("/api/v1/projects/BAL/search/", {"q": "deploy checklist"})
        assert rest.status_code == 200, rest.content
        tool = ok(user, project, "search_project", {"query": "deploy checklist"})["results"]
        selector = project_find(user=user, project=project, query="deploy checklist")
        return (
            sorted(r["kind"] for r in rest.json()["results"]),
            sorted(r["kind"] for r in tool),
            sorted(h.kind for h in selector),
        )

    assert found(member) == (["item", "skill"], ["item", "skill"], ["item", "skill"])
    monkeypatch.setitem(ROLE_PERMISSIONS, Role.MEMBER, ROLE_PERMISSIONS[Role.MEMBER] - {SKILL_READ})
    assert found(member) == (["item"], ["item"], ["item"])
    asked = client_for(member).get("/api/v1/projects/BAL/search/", {"q": "deploy", "kind": "skill"})
    assert (asked.status_code, asked.json()["results"]) == (200, [])
