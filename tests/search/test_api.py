"""GET /api/v1/projects/{key}/search/ and the q filter of /api/v1/knowledge/."""

from __future__ import annotations

import pytest

from knowledge.services import knowledge_create
from tracker.services.activity import Actor
from tracker.services.skills import skill_version_create

URL = "/api/v1/projects/BAL/search/"


@pytest.fixture
def plan(project, owner, make_item, indexed):
    with indexed():
        epic = make_item(kind="epic", title="Payments overhaul")
        ticket = make_item(title="Payments retry queue", state="ready", description="Retry failed payments.")
        done = make_item(title="Payments receipts", state="done")
        skill_version_create(
            actor=Actor(user=owner), project=project, name="payments", body="Payments runbook"
        )
    return {"epic": epic, "ticket": ticket, "done": done}


def test_search_answers_ranked_hits_with_snippets(client_for, viewer, plan):
    response = client_for(viewer).get(URL, {"q": "payments retry"})
    assert response.status_code == 200
    first = response.json()["results"][0]
    assert first == {
        "kind": "item",
        "key": plan["ticket"].key,
        "title": "Payments retry queue",
        "snippet": "**Retry** failed **payments**.",
        "score": first["score"],
        "state": "ready",
        "subkind": "ticket",
        "related": False,
    }
    assert 0 < first["score"] <= 1


def test_an_item_key_comes_first(client_for, viewer, plan):
    results = client_for(viewer).get(URL, {"q": plan["done"].key}).json()["results"]
    assert (results[0]["key"], results[0]["score"]) == (plan["done"].key, 1.0)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {"BAL-1", "BAL-2", "BAL-3", "payments"}),
        ({"kind": "skill"}, {"payments"}),
        ({"kind": "item"}, {"BAL-1", "BAL-2", "BAL-3"}),
        ({"kind": ["epic", "skill"]}, {"BAL-1", "payments"}),
        ({"state": ["ready", "done"]}, {"BAL-2", "BAL-3"}),
        ({"kind": "ticket", "state": "done"}, {"BAL-3"}),
        ({"limit": 1}, None),
    ],
)
def test_filters_by_kind_state_and_limit(client_for, viewer, plan, params, expected):
    results = client_for(viewer).get(URL, {"q": "payments", **params}).json()["results"]
    if expected is None:
        assert len(results) == 1
    else:
        assert {r["key"] for r in results} == expected


@pytest.mark.parametrize("params", [{}, {"q": ""}, {"q": "x", "kind": "poem"}, {"q": "x", "limit": 51}])
def test_bad_filters_are_field_errors(client_for, viewer, params):
    response = client_for(viewer).get(URL, params)
    assert response.status_code == 400


def test_anonymous_callers_are_refused(client_for, project):
    assert client_for(None).get(URL, {"q": "x"}).status_code == 401


def test_knowledge_q_ranks_by_hybrid_search(client_for, project, member, viewer, indexed):
    with indexed():
        for title, body in [
            ("Queue choice", "We use Redis as the Celery broker."),
            ("Celery retries", "Tasks retry three times; Celery backs off exponentially."),
            ("Coffee machine", "Descale monthly."),
        ]:
            knowledge_create(
                actor=Actor(user=member), kind="note", title=title, body=body, projects=[project]
            )
    results = client_for(viewer).get("/api/v1/knowledge/", {"q": "celery retries"}).json()["results"]
    titles = [r["title"] for r in results]
    assert titles[0] == "Celery retries"  # "Queue choice" shares a word: related at most
    assert "Coffee machine" not in titles
    debt = client_for(viewer).get("/api/v1/knowledge/", {"q": "celery", "kind": "debt"}).json()["results"]
    assert debt == []
