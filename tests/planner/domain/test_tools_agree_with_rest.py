"""The planner's read tools and the REST API answer alike: for the same human, filters and data
they answer the same items, in the same order, and refuse the same filters. The tools a turn calls
most read in SQL (tracker/db/plan_rows.py), the API through the ORM's selectors and serializers: these
tests hold the two to one answer."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge.services import knowledge_create
from planner.domain.tools import call_tool
from tests.factories import MembershipFactory
from tests.planner.domain.test_tools import ctx
from tracker.models import Claim
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_apply, changeset_propose, changeset_reject
from tracker.services.items import dependency_add
from tracker.services.skills import skill_version_create
from tracker.services.work import claim_take, report_add

BAL = "/api/v1/projects/BAL/"


def tool(user, project, name, arguments) -> dict:
    outcome = call_tool(name, arguments, ctx(user, project))
    assert not outcome.is_error, outcome.output
    return outcome.output


def rest(client_for, user, url) -> dict:
    response = client_for(user).get(url)
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def plan(project, owner, make_item, indexed):
    """Two milestones, two epics, tickets in every state, dependencies made out of key order."""
    with indexed():
        m1 = make_item(kind="milestone", title="Beta")
        m2 = make_item(kind="milestone", title="Launch")
        e1 = make_item(kind="epic", title="Login epic", milestone=m1)
        e2 = make_item(kind="epic", title="Billing epic", milestone=m2)
        states = ("draft", "ready", "in_progress", "ready", "done", "cancelled", "ready", "in_review")
        tickets = [
            make_item(
                title=f"Login ticket {n}",
                state=state,
                epic=e1 if n % 2 else e2,
                milestone=m1 if n < 4 else None,
            )
            for n, state in enumerate(states)
        ]
    actor = Actor(user=owner)
    for blocker in (tickets[6], tickets[0], tickets[4]):  # not in key order
        dependency_add(actor=actor, blocker=blocker, blocked=tickets[3])
    dependency_add(actor=actor, blocker=tickets[3], blocked=tickets[7])
    dependency_add(actor=actor, blocker=tickets[3], blocked=tickets[1])
    return {"M1": m1, "M2": m2, "E1": e1, "E2": e2, "tickets": tickets}


@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"kind": "ticket"},
        {"kind": "epic"},
        {"state": "ready"},
        {"epic": "BAL-3"},
        {"epic": "BAL-4", "state": "ready"},
        {"milestone": "BAL-1"},
        {"milestone": "BAL-1", "kind": "ticket", "state": "draft"},
    ],
)
def test_list_items_answers_what_rest_lists(project, viewer, plan, client_for, filters):
    query = "&".join(f"{name}={value}" for name, value in filters.items())
    listed = rest(client_for, viewer, f"{BAL}items/?{query}")["results"]

    items = tool(viewer, project, "list_items", filters)["items"]

    fields = ("key", "kind", "title", "state", "version", "epic", "milestone", "priority", "labels")
    assert [{name: item[name] for name in fields} for item in items] == [
        {name: item[name] for name in fields} for item in listed
    ]
    assert items  # every filter above matches something


@pytest.mark.parametrize(
    ("filters", "field", "message"),
    [
        ({"epic": "BAL-5"}, "epic", "BAL-5 is a ticket, not an epic."),
        ({"milestone": "BAL-3"}, "milestone", "BAL-3 is an epic, not a milestone."),
        ({"epic": "BAL-99"}, "epic", "Item BAL-99 not found in project BAL."),
        ({"milestone": "OTH-1"}, "milestone", "Item OTH-1 not found in project BAL."),
    ],
)
def test_list_items_refuses_the_parent_filters_rest_refuses(
    project, viewer, plan, client_for, filters, field, message
):
    query = "&".join(f"{name}={value}" for name, value in filters.items())
    response = client_for(viewer).get(f"{BAL}items/?{query}")

    outcome = call_tool("list_items", filters, ctx(viewer, project))

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {field: [message]}
    assert outcome.is_error
    assert (outcome.output["error"]["code"], outcome.output["error"]["fields"]) == (
        "invalid",
        {field: [message]},
    )


@pytest.mark.parametrize("index", [3, 0, 7])
def test_get_item_reads_what_rest_reads(project, viewer, plan, client_for, index):
    key = plan["tickets"][index].key
    detail = rest(client_for, viewer, f"{BAL}items/{key}/")

    item = tool(viewer, project, "get_item", {"key": key})

    shared = (
        "key",
        "kind",
        "title",
        "state",
        "version",
        "epic",
        "milestone",
        "priority",
        "labels",
        "description",
        "policy",
    )
    assert {name: item[name] for name in (*shared, "acceptance_criteria")} == {
        name: detail[name] for name in (*shared, "acceptance_criteria")
    }
    assert item["blocked_by"] == detail["dependencies"]["blockers"]
    assert item["blocks"] == detail["dependencies"]["blocking"]


@pytest.fixture
def worked(project, member, plan):
    """The ready ticket claimed by ``member``, with reports (links, details) on it; a done ticket
    with a report of an ended claim."""
    actor = Actor(user=member)
    done = plan["tickets"][6]
    first = claim_take(actor=actor, project=project, item=done)
    report_add(actor=actor, claim=first, kind="progress", summary="Half way.", details={"tests": 3})
    report_add(
        actor=actor, claim=first, kind="done", summary="Shipped **it**.", links=["https://example.com/pr/1"]
    )
    ticket = plan["tickets"][1]
    ticket.state = "ready"  # unblocked by hand: claimable once its blocker is done
    ticket.save(update_fields=["state"])
    dependency_blocker = plan["tickets"][3]
    dependency_blocker.state = "done"
    dependency_blocker.save(update_fields=["state"])
    claim = claim_take(actor=actor, project=project, item=ticket)
    for n in range(7):  # more than get_item shows
        report_add(actor=actor, claim=claim, kind="progress", summary=f"Step {n}", links=[], details={"n": n})
    return {"claimed": (ticket, claim), "done": (done, first)}


@pytest.mark.parametrize("which", ["claimed", "done"])
def test_get_item_shows_the_claim_and_reports_rest_shows(project, viewer, worked, client_for, which):
    item, claim = worked[which]
    detail = rest(client_for, viewer, f"{BAL}claims/{claim.pk}/")

    answer = tool(viewer, project, "get_item", {"key": item.key})

    expected_claim = {name: value for name, value in detail.items() if name != "reports"}
    assert answer["claim"] == (expected_claim if detail["status"] == "active" else None)
    newest_first = sorted(detail["reports"], key=lambda r: (r["created_at"], r["id"]), reverse=True)
    assert answer["reports"] == newest_first[:5]
    assert answer["reports"]


def test_list_items_names_the_holders_rest_names(project, viewer, member, worked, client_for):
    claims = rest(client_for, viewer, f"{BAL}claims/?active=true")["results"]

    items = tool(viewer, project, "list_items", {"kind": "ticket"})["items"]

    holders = {item["key"]: item["claimed_by"] for item in items if "claimed_by" in item}
    assert (
        holders
        == {claim["item"]: claim["holder"] for claim in claims}
        == {worked["claimed"][0].key: member.username}
    )


def test_the_tools_and_rest_agree_that_a_lapsed_claim_holds_nothing(project, viewer, worked, client_for):
    ticket, claim = worked["claimed"]
    Claim.objects.filter(pk=claim.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    runnable = rest(client_for, viewer, f"{BAL}runnable/")["results"]
    holding = rest(client_for, viewer, f"{BAL}claims/?active=true")["results"]
    detail = rest(client_for, viewer, f"{BAL}claims/{claim.pk}/")

    tickets = tool(viewer, project, "list_runnable", {})["tickets"]
    items = tool(viewer, project, "list_items", {"kind": "ticket"})["items"]
    item = tool(viewer, project, "get_item", {"key": ticket.key})

    assert tickets == [
        {
            name: row[name]
            for name in (
                "key",
                "kind",
                "title",
                "state",
                "version",
                "epic",
                "milestone",
                "priority",
                "labels",
            )
        }
        for row in runnable
    ]
    assert ticket.key in [t["key"] for t in tickets]
    assert holding == []
    assert [i["key"] for i in items if "claimed_by" in i] == []
    assert detail["status"] == "expired"
    assert item["claim"] is None
    assert Claim.objects.get(pk=claim.pk).status == "active"  # no sweep ran


def test_dependencies_are_listed_by_key_number(project, viewer, plan):
    item = tool(viewer, project, "get_item", {"key": plan["tickets"][3].key})

    assert [d["key"] for d in item["blocked_by"]] == [plan["tickets"][n].key for n in (0, 4, 6)]
    assert [d["key"] for d in item["blocks"]] == [plan["tickets"][n].key for n in (1, 7)]


def test_list_runnable_answers_what_rest_lists(project, viewer, plan, client_for):
    listed = rest(client_for, viewer, f"{BAL}runnable/")["results"]

    tickets = tool(viewer, project, "list_runnable", {})["tickets"]

    assert [t["key"] for t in tickets] == [t["key"] for t in listed]
    assert [t["key"] for t in tickets] == [plan["tickets"][6].key]  # 1 and 3 wait for unresolved blockers


@pytest.mark.parametrize("status", [None, "proposed", "applied", "rejected"])
def test_list_changesets_answers_what_rest_lists(project, member, owner, viewer, plan, client_for, status):
    operations = [{"op": "create", "kind": "ticket", "fields": {"title": "New"}}]
    changesets = [
        changeset_propose(actor=Actor(user=member), project=project, title=f"C{n}", operations=operations)
        for n in range(5)
    ]
    changeset_apply(actor=Actor(user=owner), changeset=changesets[1])
    changeset_reject(actor=Actor(user=owner), changeset=changesets[3], note="No")
    changeset_apply(actor=Actor(user=owner), changeset=changesets[4])
    listed = rest(client_for, viewer, f"{BAL}changesets/" + (f"?status={status}" if status else ""))[
        "results"
    ]

    answer = tool(viewer, project, "list_changesets", {"status": status} if status else {})["changesets"]

    assert [(c["number"], c["status"]) for c in answer] == [(c["number"], c["status"]) for c in listed]
    assert [c["number"] for c in answer] == sorted((c["number"] for c in answer), reverse=True)


def test_skills_are_what_rest_answers(project, viewer, maintainer, client_for):
    for name, body in (("planner", "v1"), ("review", "r1"), ("planner", "v2"), ("estimation", "e1")):
        skill_version_create(actor=Actor(user=maintainer), project=project, name=name, body=body)
    listed = rest(client_for, viewer, f"{BAL}skills/")["results"]

    skills = tool(viewer, project, "list_skills", {})["skills"]
    read = tool(viewer, project, "read_skill", {"name": "planner"})

    assert skills == listed
    detail = rest(client_for, viewer, f"{BAL}skills/planner/")
    assert {name: read[name] for name in ("name", "scope", "version", "body")} == {
        name: detail[name] for name in ("name", "scope", "version", "body")
    }


@pytest.mark.parametrize(
    ("arguments", "query"),
    [
        ({"query": "login"}, "q=login"),
        ({"query": "login", "kinds": ["item"], "states": ["ready"]}, "q=login&kind=item&state=ready"),
        ({"query": "BAL-7"}, "q=BAL-7"),
    ],
)
def test_search_project_finds_what_rest_finds(
    project, viewer, maintainer, plan, indexed, client_for, arguments, query
):
    with indexed():
        skill_version_create(actor=Actor(user=maintainer), project=project, name="login", body="Login checks")
    found = rest(client_for, viewer, f"{BAL}search/?{query}")["results"]

    results = tool(viewer, project, "search_project", arguments)["results"]

    assert [(r["kind"], r["key"]) for r in results] == [(r["kind"], r["key"]) for r in found]
    assert results


def test_knowledge_tools_read_what_rest_reads(project, member, plan, indexed, client_for):
    with indexed():
        entries = [
            knowledge_create(
                actor=Actor(user=member),
                kind="decision",
                title=f"Login decision {n}",
                body="Passkeys for login",
                projects=[project],
                items=[plan["tickets"][n], plan["tickets"][0]],
            )
            for n in (5, 2)
        ]
    found = rest(client_for, member, "/api/v1/knowledge/?q=passkeys login")["results"]
    detail = rest(client_for, member, f"/api/v1/knowledge/{entries[0].pk}/")

    results = tool(member, project, "search_knowledge", {"query": "passkeys login"})["results"]
    read = tool(member, project, "get_knowledge", {"id": entries[0].pk})

    assert [r["id"] for r in results] == [e["id"] for e in found]
    assert len(results) == 2
    shared = ("id", "kind", "title", "body", "version", "projects", "items")
    assert {name: read[name] for name in shared} == {name: detail[name] for name in shared}
    assert read["items"] == [plan["tickets"][0].key, plan["tickets"][5].key]


def test_knowledge_of_another_organization_is_unknown_to_the_tool(
    project, other_project, member, users, client_for
):
    """The tool reads within its session's organization; REST reads every organization of the human."""
    MembershipFactory(project=other_project, user=member, role="member")
    entry = knowledge_create(
        actor=Actor(user=member), kind="note", title="Elsewhere", projects=[other_project]
    )

    outcome = call_tool("get_knowledge", {"id": entry.pk}, ctx(member, project))

    assert rest(client_for, member, f"/api/v1/knowledge/{entry.pk}/")["title"] == "Elsewhere"
    assert outcome.is_error
    assert outcome.output["error"]["code"] == "not_found"
