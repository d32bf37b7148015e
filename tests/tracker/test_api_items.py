"""The plan over REST: item lists with filters, one item with its dependencies, runnable tickets."""

from __future__ import annotations

import pytest

from tracker.services.activity import Actor
from tracker.services.items import dependency_add, item_update

BAL = "/api/v1/projects/BAL/"


@pytest.fixture
def plan(project, owner, make_item):
    """M1 ⊃ E1 ⊃ {T1 ready, T2 ready blocked by T3 draft}; T4 done; T5 ready in no epic."""
    milestone = make_item(kind="milestone", title="M1")
    epic = make_item(kind="epic", title="E1", milestone=milestone)
    t1 = make_item(title="T1", epic=epic, milestone=milestone, state="ready")
    t2 = make_item(
        title="T2", epic=epic, state="ready", description="Do it.", acceptance_criteria=["It works"]
    )
    t3 = make_item(title="T3", epic=epic)
    t4 = make_item(title="T4", state="done")
    t5 = make_item(title="T5", state="ready")
    dependency_add(actor=Actor(user=owner), blocker=t3, blocked=t2)
    dependency_add(actor=Actor(user=owner), blocker=t4, blocked=t5)
    return {"M1": milestone, "E1": epic, "T1": t1, "T2": t2, "T3": t3, "T4": t4, "T5": t5}


def titles(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [item["title"] for item in response.json()["results"]]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", ["M1", "E1", "T1", "T2", "T3", "T4", "T5"]),
        ("?kind=ticket", ["T1", "T2", "T3", "T4", "T5"]),
        ("?kind=epic", ["E1"]),
        ("?state=ready", ["T1", "T2", "T5"]),
        ("?kind=ticket&state=done", ["T4"]),
        ("?epic=BAL-2", ["T1", "T2", "T3"]),
        ("?epic=BAL-2&state=draft", ["T3"]),
        ("?milestone=BAL-1", ["E1", "T1"]),
        ("?kind=", ["M1", "E1", "T1", "T2", "T3", "T4", "T5"]),
    ],
)
def test_item_filters(plan, viewer, client_for, query, expected):
    assert titles(client_for(viewer).get(BAL + "items/" + query)) == expected


def test_item_list_representation(plan, viewer, client_for):
    first = client_for(viewer).get(BAL + "items/?kind=ticket").json()["results"][0]

    assert first["key"] == "BAL-3"
    assert first["epic"] == "BAL-2"
    assert first["milestone"] == "BAL-1"
    assert first["version"] == 1
    assert "description" not in first


def test_item_detail_has_dependencies(plan, viewer, client_for):
    body = client_for(viewer).get(BAL + "items/BAL-4/").json()

    assert body["title"] == "T2"
    assert body["description"] == "Do it."
    assert body["acceptance_criteria"] == ["It works"]
    assert body["policy"] == {}
    assert body["dependencies"] == {
        "blockers": [{"key": "BAL-5", "title": "T3", "state": "draft"}],
        "blocking": [],
    }
    blocker = client_for(viewer).get(BAL + "items/BAL-5/").json()
    assert blocker["dependencies"]["blocking"] == [{"key": "BAL-4", "title": "T2", "state": "ready"}]


def test_unknown_item_is_404(plan, viewer, client_for):
    response = client_for(viewer).get(BAL + "items/BAL-99/")

    assert response.status_code == 404
    assert response.json()["error"]["message"] == "Item BAL-99 not found in project BAL."


def test_runnable_tickets(plan, viewer, client_for):
    assert titles(client_for(viewer).get(BAL + "runnable/")) == ["T1", "T5"]


def test_runnable_follows_the_blockers(plan, viewer, owner, client_for):
    item_update(actor=Actor(user=owner), item=plan["T3"], fields={"state": "cancelled"})

    assert titles(client_for(viewer).get(BAL + "runnable/")) == ["T1", "T2", "T5"]


def test_item_pages_by_limit_and_offset(project, viewer, make_item, client_for):
    for number in range(55):
        make_item(title=f"T{number}")
    client = client_for(viewer)

    first = client.get(BAL + "items/").json()
    second = client.get(first["next"]).json()
    two = client.get(BAL + "items/?limit=2&offset=3").json()

    assert (first["count"], first["limit"], first["offset"], len(first["results"])) == (55, 50, 0, 50)
    assert first["next"].endswith("/api/v1/projects/BAL/items/?limit=50&offset=50")
    assert first["previous"] is None
    assert [i["title"] for i in second["results"]] == [f"T{n}" for n in range(50, 55)]
    assert second["next"] is None
    assert [i["title"] for i in two["results"]] == ["T3", "T4"]
    assert two["previous"].endswith("/api/v1/projects/BAL/items/?limit=2&offset=1")
    assert client.get(BAL + "items/?offset=60").json()["results"] == []


def test_the_page_of_earlier_versions_still_reads_its_page(project, viewer, make_item, client_for):
    for number in range(5):
        make_item(title=f"T{number}")
    second = client_for(viewer).get(BAL + "items/?page=2&limit=2").json()
    assert [i["title"] for i in second["results"]] == ["T2", "T3"]
    assert "page=" not in second["next"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=201", "limit"),
        ("limit=x", "limit"),
        ("offset=-1", "offset"),
        ("offset=\u0663", "offset"),
        ("limit=99999999999999999999", "limit"),
        ("page=0", "page"),
    ],
)
def test_bad_paging_is_a_400_naming_the_parameter(project, viewer, client_for, query, field):
    answer = client_for(viewer).get(BAL + "items/?" + query)
    assert answer.status_code == 400
    assert field in answer.json()["error"]["fields"]


def test_item_list_queries_do_not_grow_with_the_plan(
    plan, viewer, make_item, client_for, django_assert_max_num_queries
):
    client = client_for(viewer)
    client.get(BAL + "items/")  # roles are cached on the user object from here on
    for number in range(20):
        make_item(title=f"More {number}", epic=plan["E1"], milestone=plan["M1"])

    with django_assert_max_num_queries(4):
        assert client.get(BAL + "items/").status_code == 200
